#pragma once

// The blocks of the controller's index that a lookup can match, published for lookups answered
// off the server actor (docs/protocol.md, "lookup": answered where it is safe). The controller
// reports every copy that turns ready or stops being ready (model/cache/block_events.hpp); this
// sink applies each report to a sharded map as it happens, on the actor's thread, before the
// controller answers the message that caused it, and passes it on to the next sink (the KV
// events'). So a removal is visible here before any reply or event that could show it.

#include <array>
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

  /// Leading device hits, then host hits, as cache_model::match counts them, but block by block:
  /// each block counted was ready in its tier at some instant during the call. A block whose
  /// device copy is still being filled counts as a host hit where its host copy is ready (the
  /// controller's own match stops there). Any thread.
  prefix_hit match(const cache_block* blocks, size_t n) const;

 private:
  struct copies {
    uint32_t tokens = 0;
    bool device = false;
    bool host = false;
  };
  struct shard {
    mutable std::mutex mutex;
    absl::flat_hash_map<block_hash, copies> blocks;
  };
  static constexpr size_t shard_count = 64;
  shard& shard_of(block_hash h) { return shards_[(h ^ (h >> 29)) % shard_count]; }
  const shard& shard_of(block_hash h) const { return shards_[(h ^ (h >> 29)) % shard_count]; }

  block_event_sink* next_;
  std::array<shard, shard_count> shards_;
};

}  // namespace kvtier::serve
