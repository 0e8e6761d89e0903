#pragma once

// What the server's shards share (docs/design.md, "Controller stacks"): which controller stack
// serves each connection's engines, and the numbers that are unique across the server (engine
// ids, the controllers' request and step numbers). With a stack per engine each stack has a
// server actor of its own (a shard), so that the engines' sessions run side by side as their
// block work does; the socket thread places a connection's engines at its hello and routes the
// connection's calls to that stack's shard. Placing and leaving take a mutex (a hello, a bye or
// a timeout: rare); the numbers are atomics.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace kvtier::serve {

class engine_directory {
 public:
  explicit engine_directory(uint32_t stacks);

  uint32_t stacks() const { return static_cast<uint32_t>(stacks_.size()); }

  /// The socket thread, at a hello it decoded on `conn` from an engine named `name`: the stack
  /// that will serve it, counted as serving it from now on. A connection with engines still
  /// registered keeps their stack; otherwise the free stack an engine of that name last left (a restarted
  /// engine finds the host copies it left), else the stack serving the fewest (the first of
  /// those), so that up to one engine per stack each get their own.
  uint32_t place(uint64_t conn, const std::string& name);
  /// The shard of `stack`, at a hello the socket thread did not place (with one stack, or on a
  /// connection already placed there): counted as serving one more engine of `conn`; returns
  /// `stack`.
  uint32_t join(uint32_t stack, uint64_t conn);
  /// The shard: the hello placed on `stack` registered no engine (refused).
  void cancel(uint32_t stack, uint64_t conn);
  /// The shard: an engine named `name` of `conn` left `stack` (bye, timeout, shutdown).
  void leave(uint32_t stack, uint64_t conn, const std::string& name);
  /// Engines placed on `stack` now (tests).
  uint32_t engines_on(uint32_t stack) const;

  std::atomic<uint64_t> next_engine{1};
  std::atomic<uint64_t> next_request{1};
  std::atomic<uint64_t> next_step{1};  ///< the controllers' step numbers, unique across engines

 private:
  struct stack_use {
    uint32_t engines = 0;
    std::string last_engine;
  };
  struct conn_use {
    uint32_t stack = 0;
    uint32_t engines = 0;
  };
  void release(uint32_t stack, uint64_t conn);

  mutable std::mutex mutex_;
  std::vector<stack_use> stacks_;
  std::unordered_map<uint64_t, conn_use> conns_;
};

}  // namespace kvtier::serve
