#pragma once

// Block identity. A cache block is named by a 64-bit hash chained over every block before it, so
// equal hashes mean equal content *and* equal prefix. Two sources of identity exist:
//  - token ids (native traces, the live controller): xxHash over (parent hash, tokens, extra keys);
//  - ids that a trace already provides (Mooncake, agentic): the id is chained onto the parent
//    together with an id space, one space per trace file, so equal ids in different files differ.
//
// Block-size mapping (trace block size T, cache block size C, see map_trace_blocks):
//  - C == T: one cache block per trace block;
//  - C <  T (T % C == 0): trace block i with t_i tokens becomes floor(t_i / C) cache blocks, the
//    sub-block j named by (trace id, j);
//  - C >  T (C % T == 0): each run of C / T trace blocks becomes one cache block, named by all of
//    its ids;
//  - otherwise the sizes cannot map and check_block_sizes() says so.
// Only full cache blocks are named, as with token ids: a partial last block (a partial trace
// block, a run cut short) is never shared, so its tokens, like tokens that no trace id covers
// (agentic traces list full blocks only), belong to no block and are always computed.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvtier {

using block_hash = uint64_t;

/// One block of a request as the cache sees it.
struct cache_block {
  block_hash hash = 0;
  uint32_t tokens = 0;  ///< tokens it holds: the block size, or fewer for a partial last block
};

/// Chains a block of token ids (plus optional extra keys, e.g. multimodal item hashes) onto
/// `parent`. Use 0 as the parent of a request's first block.
block_hash hash_token_block(block_hash parent, const int32_t* tokens, size_t count,
                            const uint64_t* extra_keys = nullptr, size_t extra_count = 0);

/// Chains a trace-provided block id onto `parent`; `part` tells sub-blocks of one id apart.
block_hash hash_trace_block(block_hash parent, uint64_t id_space, uint64_t id, uint32_t part);

/// Returns an error text if trace blocks of `trace_block_size` tokens cannot map onto cache
/// blocks of `cache_block_size` tokens.
std::optional<std::string> check_block_sizes(uint32_t trace_block_size,
                                             uint32_t cache_block_size);

/// Appends the cache blocks of a request whose trace lists `ids` (blocks of `trace_block_size`
/// tokens over a prompt of `input_tokens`) to `out`. Requires check_block_sizes() to pass and
/// ids.size() * trace_block_size < input_tokens + trace_block_size.
void map_trace_blocks(uint64_t id_space, const uint64_t* ids, size_t id_count,
                      uint32_t input_tokens, uint32_t trace_block_size,
                      uint32_t cache_block_size, std::vector<cache_block>& out);

/// Appends the full cache blocks of a prompt given as token ids (a partial tail is not a block,
/// as in every engine: its KV is never shared).
void map_token_blocks(const int32_t* tokens, size_t count, uint32_t cache_block_size,
                      std::vector<cache_block>& out);

}  // namespace kvtier
