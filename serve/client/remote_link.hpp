#pragma once

// The client stub's socket thread (serve/client/remote_controller.hpp): it owns the DEALER socket of a
// client that has said hello, sends the calls the actor queues, and posts each reply back to
// the actor as (wake_atom, call id), keeping the reply until the actor takes it. So no handler
// of the actor waits on the socket: a call is a queue push, its reply a message.

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "actors/messages.hpp"
#include "serve/client/client.hpp"

namespace kvtier::serve {

class remote_link {
 public:
  /// Takes over `link` (hello said) and starts the thread; replies go to `owner`, held weakly
  /// so that one after the actor ended goes nowhere.
  remote_link(std::shared_ptr<client> link, cache_controller_actor owner);
  /// Sends what is queued (a bye, typically), then stops the thread.
  ~remote_link();
  remote_link(const remote_link&) = delete;
  remote_link& operator=(const remote_link&) = delete;

  /// Queues `c` under the next call id, with the client's token and engine; returns the id,
  /// never 0 (which the actor's own timer uses).
  uint64_t send(serve::call c);
  /// The reply to `id`, once it was posted.
  std::optional<reply> take(uint64_t id);

  /// Posted instead of a call id when the socket failed (a frame that is no msgpack, a socket
  /// error); failure() then says why, and the thread has ended.
  static constexpr uint64_t broken = ~uint64_t{0};
  std::string failure();

 private:
  void run();
  void serve_socket();
  void post(uint64_t id);
  void wake();

  std::shared_ptr<client> link_;  // its socket: the thread's alone once it runs
  caf::weak_actor_ptr owner_;
  const std::string token_;
  const uint64_t engine_;
  uint64_t next_id_ = 1;
  msgpack::sbuffer buf_;
  int wake_fd_ = -1;
  std::mutex mutex_;
  std::deque<std::string> outgoing_;
  std::unordered_map<uint64_t, reply> inbox_;
  bool stopping_ = false;
  std::string failure_;
  std::thread thread_;
};

}  // namespace kvtier::serve
