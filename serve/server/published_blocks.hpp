#pragma once

// The blocks of the controller's index that a lookup can match, published for lookups answered
// off the server actor (docs/protocol.md, "lookup": answered where it is safe). The controller
// reports every copy that turns ready or stops being ready (model/cache/block_events.hpp). On
// the actor's thread this sink only appends each report to a list and, at the end of the
// controller's message (batch_end, before the message's replies and KV events go out), hands the
// list over under one lock; the one reader thread (the socket thread) applies what was handed
// over to its own map before it matches a prompt. A map shared under per-block locks cost the
// actor's thread more than the lookups it took off it (BENCHMARKS.md, "The open-loop curve"):
// a Mooncake step reports thousands of copies. So every removal an earlier reply or KV event
// could have shown is applied before the next match.

#include <cstdint>
#include <mutex>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "model/cache/block_events.hpp"
#include "model/messages/front_end.hpp"

namespace kvtier::serve {

class published_blocks final : public block_event_sink {
 public:
  /// `next`: the sink reports go on to (null: none).
  explicit published_blocks(block_event_sink* next = nullptr) : next_(next) {}

  void stored(tier where, block_hash hash, std::optional<block_hash> parent,
              uint32_t tokens) override;
  void removed(tier where, block_hash hash) override;
  void cleared() override;
  void batch_end() override;

  /// Leading device hits, then host hits, as cache_model::match counts them, after every batch
  /// the controller ended: each block counted was ready in its tier when a batch ended, and no
  /// later ended batch removed it. A block whose device copy is still being filled counts as a
  /// host hit where its host copy is ready (the controller's own match stops there). One reader
  /// thread only.
  prefix_hit match(const cache_block* blocks, size_t n);

 private:
  enum class change : uint8_t { device_on, device_off, host_on, host_off, clear };
  struct report {
    change what;
    uint32_t tokens;
    block_hash hash;
  };
  struct copies {
    uint32_t tokens = 0;
    bool device = false;
    bool host = false;
  };
  void record(change what, block_hash hash, uint32_t tokens);
  void catch_up();

  block_event_sink* next_;
  std::vector<report> batch_;       // the actor's thread: this batch's reports
  std::mutex mutex_;
  std::vector<report> handed_;      // ended batches not yet applied
  std::vector<report> applying_;    // the reader's thread
  absl::flat_hash_map<block_hash, copies> blocks_;  // the reader's thread
};

}  // namespace kvtier::serve
