#pragma once

// Lookups answered off the server actor (docs/protocol.md, "lookup"; docs/design.md, "Beside an
// engine"). A lookup takes nothing, so it need not queue behind the actor's block work: the
// socket thread answers it from the blocks the controller publishes (published_blocks.hpp)
// when that is safe, and hands the actor only a record to count. It is safe when the call is
// well formed and authorised, its engine is registered on its connection at protocol version 1
// or 2 (version 3 lookups read the engine's computed prefix), storage need not be asked (no pool,
// or the device and host hits cover the prompt), the server is not stopping, and every earlier
// call of the connection has been answered (the socket thread knows). Anything else goes to the
// actor as before. Under serve.controller_stacks=per_engine each stack publishes its own blocks and
// a lookup matches its engine's stack's.

#include <chrono>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "serve/server/inbound_calls.hpp"
#include "serve/server/published_blocks.hpp"

namespace kvtier::serve {

struct off_actor_settings {
  std::string token;  ///< empty: none required
  uint32_t block_size = 64;
  uint64_t max_blocks_per_request = 1u << 20;
  bool storage = false;  ///< a storage pool: lookups that miss in host go to the actor
};

class off_actor_lookups {
 public:
  /// `stacks`: the controller stacks, each publishing its own blocks; `next`: the sink their
  /// block reports go on to (the KV events'; null: none).
  off_actor_lookups(off_actor_settings s, size_t stacks, block_event_sink* next);

  /// The sink to set as stack `stack`'s controller's (options.events).
  block_event_sink* sink(size_t stack) { return &blocks_.at(stack); }

  /// The actor's thread: an engine registered on `conn` at `version`, served by `stack`, or
  /// dropped.
  void engine_registered(uint64_t engine, uint64_t conn, uint32_t version, uint32_t stack);
  void engine_dropped(uint64_t engine);

  /// The socket thread: the reply to `in` when it can be answered here (then `record` tells the
  /// actor what to count), else none.
  std::optional<std::string> try_answer(const inbound_call& in, answered_lookup& record);

 private:
  struct engine_ref {
    uint64_t conn = 0;
    uint32_t version = 1;
    uint32_t stack = 0;
  };
  off_actor_settings settings_;
  std::deque<published_blocks> blocks_;  // by stack; a deque: the sinks' addresses stay
  mutable std::mutex engines_mutex_;
  std::unordered_map<uint64_t, engine_ref> engines_;
};

}  // namespace kvtier::serve
