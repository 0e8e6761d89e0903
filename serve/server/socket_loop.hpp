#pragma once

// The socket thread of `kvtier serve` (docs/design.md, "Beside an engine"): it owns the ROUTER
// socket, reads and decodes every call waiting on it and hands them to the server actors as one
// message per shard and wake-up (each connection's calls to the shard of the stack its engines
// were placed on at hello, engine_directory.hpp), and sends the replies the shards leave in its
// outbox. It also runs the clean stop: after a stop signal the server releases every engine's
// requests, and the loop goes on until the controllers' copies have landed (at most 30 s).

#include <chrono>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <zmq.hpp>

#include "caf/all.hpp"

#include "actors/messages.hpp"
#include "serve/server/curve_gate.hpp"
#include "serve/server/engine_directory.hpp"
#include "serve/server/inbound_calls.hpp"

namespace kvtier::serve {

class outbox;
class off_actor_lookups;

/// CURVE on the server's socket (serve/wire/curve.hpp): its secret key (empty: plaintext, for
/// loopback binds only), and the client public keys it admits (empty: any that knows its key).
struct socket_security {
  std::string curve_secret;
  std::vector<std::string> curve_clients;
};

class socket_loop {
 public:
  /// Binds `endpoint`: throws config_error for a bad one, std::runtime_error when it is taken.
  /// `io_threads`: ZeroMQ's I/O threads; each engine's connection is served by one of them.
  socket_loop(const std::string& endpoint, uint64_t max_message_bytes,
              const socket_security& security = {}, int io_threads = 1);
  ~socket_loop();
  socket_loop(const socket_loop&) = delete;
  socket_loop& operator=(const socket_loop&) = delete;

  /// The endpoint bound (a wildcard port resolved).
  const std::string& endpoint() const { return bound_; }
  /// Where the server actor leaves its replies (any thread).
  reply_sink sink() const;
  /// Connections whose handshake failed (a plaintext client of a CURVE socket, a client with
  /// another server key or a key not listed), counted as the socket's monitor reports them.
  std::shared_ptr<const std::atomic<uint64_t>> refused_connections() const { return refused_; }
  /// Answers the lookups it can off the actor from now on (off_actor_lookups.hpp).
  void answer_lookups(std::shared_ptr<off_actor_lookups> lookups) {
    off_actor_ = std::move(lookups);
  }
  /// Serves until a stop signal and the stop after it; returns the exit code (1 when copies
  /// of any of `controllers` were still in flight after 30 s). `shards`: the server actors, by
  /// stack of `directory`.
  int run(caf::scoped_actor& self, const std::vector<caf::actor>& shards,
          engine_directory& directory, const std::vector<cache_controller_actor>& controllers);

 private:
  // A client's routing envelope (its identity, and the empty delimiter a REQ socket adds).
  struct envelope {
    std::string identity;
    bool delimiter = false;
  };

  void wait_for_work(bool stopping);
  void read_monitor();
  void flush_outbox();
  void send_to(const envelope& env, const std::string& bytes);
  void read_calls(engine_directory& directory);
  uint32_t shard_of(inbound_call& in, engine_directory& directory);
  bool answered_here(const envelope& env, const inbound_call& in);
  void hand_over(const std::vector<caf::actor>& shards);
  bool stopped(caf::scoped_actor& self, const std::vector<cache_controller_actor>& controllers,
               int& code);

  uint64_t max_bytes_;
  zmq::context_t context_;
  std::unique_ptr<curve_gate> gate_;  // before the router: libzmq asks it about handshakes
  zmq::socket_t router_;
  zmq::socket_t monitor_;
  std::shared_ptr<std::atomic<uint64_t>> refused_ = std::make_shared<std::atomic<uint64_t>>(0);
  std::string bound_;
  std::shared_ptr<outbox> box_;
  std::unordered_map<std::string, uint64_t> conn_of_;
  std::unordered_map<uint64_t, envelope> envelopes_;
  uint64_t next_conn_ = 1;
  std::vector<std::pair<uint64_t, std::string>> batch_;
  std::vector<zmq::message_t> frames_;
  std::vector<inbound_calls> inbound_;  // by shard
  // The stack each connection's engines were placed on (its last hello's); absent: shard 0.
  std::unordered_map<uint64_t, uint32_t> shard_of_conn_;
  std::shared_ptr<off_actor_lookups> off_actor_;
  // Calls of each connection handed to the actor and not answered yet: a lookup is answered off
  // the actor only when its connection has none (every earlier call answered).
  std::unordered_map<uint64_t, uint32_t> unanswered_;
  zmq::pollitem_t items_[3] = {};
  std::chrono::steady_clock::time_point deadline_;
};

}  // namespace kvtier::serve
