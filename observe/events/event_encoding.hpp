#pragma once

// KV events on the wire (docs/events.md): a batch of the index's block events as one msgpack
// EventBatch, in the map layout of vLLM's kv_events (EventBatch and each event a map; events
// tagged by "type"). Consecutive stores of a chained run in one tier become one BlockStored
// (block_hashes in prefix order, parent_block_hash of the first), consecutive removals in one
// tier one BlockRemoved, as an engine reports a request's blocks.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/cache/block_events.hpp"

namespace kvtier {

struct event_batch_header {
  double ts = 0;                     ///< seconds since the Unix epoch
  std::optional<int64_t> data_parallel_rank;
};

/// The msgpack bytes of one EventBatch.
std::string encode_event_batch(const event_batch_header& header,
                               const std::vector<block_event>& events);

/// How many wire events encode_event_batch makes of `events` (runs merged).
size_t wire_event_count(const std::vector<block_event>& events);

}  // namespace kvtier
