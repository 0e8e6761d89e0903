#pragma once

// Requests read and mapped to blocks ahead of a replay, so that several replays (benchmarks,
// comparisons, tests) run on exactly the same input and none of them pays for parsing.

#include <string>
#include <vector>

#include <memory>

#include "model/front_end/request_feed.hpp"
#include "core/trace_request.hpp"

namespace kvtier {

struct preloaded_trace {
  std::vector<trace_request> requests;       ///< by seq
  std::vector<std::vector<cache_block>> blocks;  ///< by seq
  uint64_t block_count = 0;
  double parse_s = 0;  ///< reading the files
  double map_s = 0;    ///< hashing blocks
};

/// Reads `traces` (format detected) and maps their requests onto `block_size`-token blocks.
preloaded_trace preload(const std::vector<std::string>& traces, uint32_t block_size);
/// Maps requests built in code (seq must be their index).
preloaded_trace preload(std::vector<trace_request> requests, uint32_t block_size);
/// A feed replaying `t` from the start; `t` must outlive it.
std::shared_ptr<request_feed> feed_of(const preloaded_trace& t);

}  // namespace kvtier
