#pragma once

// Turns a trace request into the cache blocks it covers (block_hash.hpp has the mapping rule),
// checking once per trace file that its block size maps onto cache.block_size.

#include <cstdint>
#include <string>
#include <vector>

#include "core/block_hash.hpp"
#include "core/trace_request.hpp"

namespace kvtier {

class request_blocks {
 public:
  /// `files` names the trace files by index, for error messages. A request may cover at most
  /// `max_blocks` cache blocks (trace.max_blocks_per_request).
  request_blocks(uint32_t cache_block_size, std::vector<std::string> files,
                 uint64_t max_blocks = UINT32_MAX);

  /// Replaces `out` with the request's blocks. A request without block identity (Azure) gets
  /// ceil(input / block size) blocks of its own that nothing else shares. Throws config_error if
  /// the request's trace block size cannot map onto the cache block size, and trace_error (file
  /// and line) if it would cover more than max_blocks blocks, before building any.
  void map(const trace_request& r, std::vector<cache_block>& out);

  /// The most blocks map() can give `r`: ceil(input tokens / cache block size).
  uint64_t blocks_at_most(const trace_request& r) const;

 private:
  uint32_t block_size_;
  uint64_t max_blocks_;
  std::vector<std::string> files_;
  std::vector<uint32_t> checked_;  // per file: trace block size found compatible, 0 = none yet
  std::vector<uint64_t> scratch_;
};

}  // namespace kvtier
