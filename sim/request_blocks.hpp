#pragma once

// Turns a trace request into the cache blocks it covers (block_hash.hpp has the mapping rule),
// checking once per trace file that its block size maps onto cache.block_size.

#include <string>
#include <vector>

#include "actors/cache_controller/block_hash.hpp"
#include "core/trace_request.hpp"

namespace kvtier {

class request_blocks {
 public:
  /// `files` names the trace files by index, for error messages.
  request_blocks(uint32_t cache_block_size, std::vector<std::string> files);

  /// Replaces `out` with the request's blocks. A request without block identity (Azure) gets
  /// ceil(input / block size) blocks of its own that nothing else shares. Throws config_error if
  /// the request's trace block size cannot map onto the cache block size.
  void map(const trace_request& r, std::vector<cache_block>& out);

 private:
  uint32_t block_size_;
  std::vector<std::string> files_;
  std::vector<uint32_t> checked_;  // per file: trace block size found compatible, 0 = none yet
  std::vector<uint64_t> scratch_;
};

}  // namespace kvtier
