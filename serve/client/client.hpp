#pragma once

// A client of `kvtier serve` (docs/protocol.md) over a ZeroMQ DEALER socket: blocking calls, and
// calls whose replies are collected later (wait). Used by engine-sim, the benchmark and tests.
// Calls are written by the wire format's encoder (serve/wire/call.hpp); `send(op, fields, fill)`
// writes any map, for tests of what a well-behaved client would not send. Not thread-safe: one
// thread uses one client.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <msgpack.hpp>
#include <zmq.hpp>

#include "core/model_shape.hpp"
#include "serve/wire/attach_request.hpp"
#include "serve/wire/curve.hpp"
#include "serve/wire/map_writer.hpp"
#include "serve/wire/session_replies.hpp"

namespace kvtier::serve {

struct call;  // serve/wire/call.hpp

/// The server answered ok: false.
struct remote_error : std::runtime_error {
  std::string kind;
  remote_error(std::string k, const std::string& message)
    : std::runtime_error(k + ": " + message), kind(std::move(k)) {}
};

/// A reply's map, read by key.
class reply {
 public:
  reply() = default;
  explicit reply(msgpack::object_handle h) : handle_(std::move(h)) {}
  const msgpack::object& root() const { return handle_.get(); }
  const msgpack::object* find(std::string_view key) const { return find_in(root(), key); }
  uint64_t u64(std::string_view key) const;
  int64_t i64(std::string_view key) const;
  bool flag(std::string_view key) const;
  std::string str(std::string_view key) const;
  static const msgpack::object* find_in(const msgpack::object& map, std::string_view key);
  static uint64_t u64_in(const msgpack::object& map, std::string_view key);
  /// The call id the reply answers (0 when it names none).
  uint64_t id() const;
  size_t bytes = 0;  ///< the reply's size on the wire

 private:
  msgpack::object_handle handle_;
};

class client {
 public:
  /// `timeout`: how long a blocking call waits for its reply before throwing.
  /// `curve`: the server's public key and this client's pair (serve/wire/curve.hpp); empty: a
  /// plaintext connection (loopback servers only).
  client(const std::string& endpoint, std::string token = {},
         std::chrono::milliseconds timeout = std::chrono::seconds(60),
         const curve_client_keys& curve = {});
  /// A client on `shared`'s I/O thread: several clients in one process (the benchmark's) share
  /// one context, as an engine's process would.
  client(zmq::context_t& shared, const std::string& endpoint, std::string token = {},
         std::chrono::milliseconds timeout = std::chrono::seconds(60),
         const curve_client_keys& curve = {});

  /// Sends `c` under the next call id, with the client's token and engine (when registered).
  /// Returns the call's id.
  uint64_t send(serve::call c);
  /// Writes a call: op, id, token and engine (when registered) and `fields` more entries that
  /// `fill` writes. Returns the call's id.
  uint64_t send(std::string_view op, uint32_t fields,
                const std::function<void(map_writer&)>& fill = {});
  /// Sends raw bytes as one call (tests of bad input); replies come back as usual.
  void send_raw(std::string_view bytes);
  /// Blocks until the reply to `id` comes (replies to other calls are kept for later).
  reply receive(uint64_t id);
  /// The reply to `id` if it has come, without blocking.
  std::optional<reply> try_receive(uint64_t id);
  /// The next reply of any call (raw), or none within `timeout`.
  std::optional<reply> next(std::chrono::milliseconds timeout);
  /// send + receive; throws remote_error when the reply is not ok.
  reply call(serve::call c);
  reply call(std::string_view op, uint32_t fields = 0,
             const std::function<void(map_writer&)>& fill = {});

  /// hello with the given model; sets engine(). Throws remote_error on refusal. With `tensors`
  /// (real mode) it offers protocol version 2 only and exports them.
  reply hello(const std::string& name, const model_shape& model, uint32_t block_size,
              const attach_request* tensors = nullptr);
  /// hello offering only `version` (3: the engine-owned device tier), exporting `tensors` when
  /// given (real mode); throws remote_error on refusal, or when the server chose another.
  reply hello_version(const std::string& name, const model_shape& model, uint32_t block_size,
                      uint32_t version, const attach_request* tensors = nullptr);
  /// Config values (key, JSON text) every later hello sends in `config`: the server refuses
  /// any that differs from its own (docs/protocol.md, "hello").
  void share_config(std::vector<std::pair<std::string, std::string>> values) {
    shared_config_ = std::move(values);
  }
  /// The last hello's reply, decoded.
  const hello_answer& greeting() const { return greeting_; }
  uint64_t engine() const { return engine_; }
  const std::string& token() const { return token_; }
  /// The socket, for a poll beside other descriptors (the client stub's socket thread).
  void* socket_handle() { return socket_.handle(); }
  size_t last_sent_bytes() const { return last_sent_; }
  void set_engine(uint64_t e) { engine_ = e; }

 private:
  client(std::unique_ptr<zmq::context_t> own, zmq::context_t* shared, const std::string& endpoint,
         std::string token, std::chrono::milliseconds timeout,
         const curve_client_keys& curve);
  bool pull(std::chrono::milliseconds timeout);  // one reply into stash_
  reply hello_of(const std::string& name, const model_shape& model, uint32_t block_size,
                 const attach_request* tensors, uint32_t version);
  void stamp(serve::call& c);  // the next id, the token, the engine
  std::string no_reply();  // why a call went unanswered, as far as it can tell
  std::unique_ptr<zmq::context_t> own_context_;  // null on a shared context
  zmq::socket_t socket_;
  // The socket's handshakes (zmq_socket_monitor): a call that times out says whether a handshake
  // with the server ever completed (a CURVE server refuses a client without its public key).
  zmq::socket_t monitor_;
  bool curve_on_ = false;
  bool handshake_done_ = false;
  std::string token_;
  std::chrono::milliseconds timeout_;
  uint64_t engine_ = 0;
  uint64_t next_id_ = 1;
  size_t last_sent_ = 0;
  std::map<uint64_t, reply> stash_;
  msgpack::sbuffer buf_;
  hello_answer greeting_;
  std::vector<std::pair<std::string, std::string>> shared_config_;
};

/// Writes one map as a call into `buf` (cleared first): op, id, the token when there is one, the
/// engine when registered (not 0), then `fields` entries that `fill` writes.
void write_call(msgpack::sbuffer& buf, std::string_view op, uint64_t id, const std::string& token,
                uint64_t engine, uint32_t fields, const std::function<void(map_writer&)>& fill);

/// Throws remote_error if `r` is an error reply.
void check_ok(const reply& r);

}  // namespace kvtier::serve
