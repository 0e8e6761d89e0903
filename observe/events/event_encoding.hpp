#pragma once

// KV events on the wire (docs/events.md): a batch of the index's block events as one msgpack
// EventBatch, in vLLM's layout. The batch is always vLLM's array_like EventBatch,
// [ts, events, data_parallel_rank]. Its events are, in the `map` layout (the default), current
// vLLM's: since vLLM PR #42892 its event structs have no array_like, so each event is a map
// tagged by "type" with every field that has no default (BlockStored: block_hashes,
// parent_block_hash, token_ids, block_size, lora_id, medium, lora_name). In the `array` layout
// they are vLLM v0.11.0's: an array led by the tag, the fields after it in declaration order,
// lora_name last (msgspec ignores trailing fields a release lacks; llm-d's array decoder counts
// them). Consecutive stores of a chained run in one tier become one BlockStored (block_hashes in
// prefix order, parent_block_hash of the first, token_ids every block's tokens in order),
// consecutive removals in one tier one BlockRemoved, as an engine reports a request's blocks.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/cache/block_events.hpp"

namespace kvtier {

/// How the events of a batch go on the wire: `map`, current vLLM's tagged maps; `array`, vLLM
/// v0.11.0's tagged arrays.
enum class event_layout : uint8_t { array, map };

/// "array" or "map": the spelling of serve.events_layout.
const char* to_string(event_layout layout);
/// The layout named `name`; nullopt for any other text.
std::optional<event_layout> event_layout_of(const std::string& name);

/// The medium an event names for a tier, as vLLM and Dynamo spell them: "GPU", "CPU", and
/// "EXTERNAL" (Dynamo's name for a tier outside the instance) for the storage pool.
const char* medium_name(tier t);

struct event_batch_header {
  double ts = 0;                     ///< seconds since the Unix epoch
  std::optional<int64_t> data_parallel_rank;
  event_layout layout = event_layout::map;
};

/// A block event as subscribers see it: `block.hash` and `block.parent` are the names the engine
/// gave the blocks, `token_ids` the block's `block.tokens` token ids.
struct published_event {
  block_event block;
  std::vector<int32_t> token_ids;  ///< empty: unknown (placeholder_tokens are sent)
};

/// What a BlockStored carries for a block whose tokens kvtier does not know (an engine that
/// sends hashes only): `count` token ids, the first three the hash's bits (31, 31 and 2), the
/// rest 0. Consumers that slice token_ids by block_size get a full block for every hash, and
/// distinct hashes get distinct token blocks, so no real prompt's tokens match them by accident.
std::vector<int32_t> placeholder_tokens(block_hash hash, uint32_t count);

/// `events` with their tokens unknown.
std::vector<published_event> with_unknown_tokens(const std::vector<block_event>& events);

/// The msgpack bytes of one EventBatch.
std::string encode_event_batch(const event_batch_header& header,
                               const std::vector<published_event>& events);
/// The same, for events whose tokens are unknown.
std::string encode_event_batch(const event_batch_header& header,
                               const std::vector<block_event>& events);

/// How many wire events encode_event_batch makes of `events` (runs merged).
size_t wire_event_count(const std::vector<published_event>& events);
size_t wire_event_count(const std::vector<block_event>& events);

}  // namespace kvtier
