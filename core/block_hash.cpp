#include "core/block_hash.hpp"

#include <algorithm>

// xxHash inlined (the same functions, compiled here): a block's name hashes 32 bytes, and the
// library's entry point spends more on dispatching by length than on hashing them.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "core/check.hpp"

namespace kvtier {

block_hash hash_token_block(block_hash parent, const int32_t* tokens, size_t count,
                            const uint64_t* extra_keys, size_t extra_count) {
  XXH3_state_t state;
  // A state on the stack must start with seed 0: xxHash 0.8 skips deriving the secret when the
  // seed field already equals the seed, so a stale field left by an earlier call made this hash
  // depend on whatever else had since written that stack memory.
  XXH3_INITSTATE(&state);
  XXH3_64bits_reset_withSeed(&state, 0x6b76746965722d74ULL);  // "kvtier-t"
  XXH3_64bits_update(&state, &parent, sizeof(parent));
  uint64_t n = count;
  XXH3_64bits_update(&state, &n, sizeof(n));
  XXH3_64bits_update(&state, tokens, count * sizeof(int32_t));
  if (extra_count > 0)
    XXH3_64bits_update(&state, extra_keys, extra_count * sizeof(uint64_t));
  return XXH3_64bits_digest(&state);
}

block_hash hash_trace_block(block_hash parent, uint64_t id_space, uint64_t id, uint32_t part) {
  const uint64_t words[4] = {parent, id_space, id, part};
  return XXH3_64bits_withSeed(words, sizeof(words), 0x6b76746965722d69ULL);  // "kvtier-i"
}

std::optional<std::string> check_block_sizes(uint32_t trace_block_size,
                                             uint32_t cache_block_size) {
  if (trace_block_size == 0 || cache_block_size == 0)
    return std::string{"block sizes must be positive"};
  if (trace_block_size % cache_block_size == 0 || cache_block_size % trace_block_size == 0)
    return std::nullopt;
  return "cache.block_size=" + std::to_string(cache_block_size)
         + " cannot map the trace's " + std::to_string(trace_block_size)
         + "-token blocks: one block size must be a multiple of the other";
}

void map_trace_blocks(uint64_t id_space, const uint64_t* ids, size_t id_count,
                      uint32_t input_tokens, uint32_t trace_block_size,
                      uint32_t cache_block_size, std::vector<cache_block>& out) {
  KVTIER_ASSERT(!check_block_sizes(trace_block_size, cache_block_size));
  KVTIER_ASSERT(uint64_t{id_count} * trace_block_size < uint64_t{input_tokens} + trace_block_size
                || id_count == 0);
  auto trace_tokens = [&](size_t i) {
    uint64_t begin = uint64_t{i} * trace_block_size;
    uint64_t end = std::min<uint64_t>(begin + trace_block_size, input_tokens);
    return static_cast<uint32_t>(end - begin);
  };
  if (out.empty())  // a request's list, filled block by block (a caller appending keeps its growth)
    out.reserve(input_tokens / cache_block_size);
  block_hash parent = 0;
  if (cache_block_size <= trace_block_size) {
    const bool split = cache_block_size < trace_block_size;
    for (size_t i = 0; i < id_count; ++i) {
      uint32_t left = trace_tokens(i);
      for (uint32_t part = split ? 1 : 0; left >= cache_block_size; ++part) {
        parent = hash_trace_block(parent, id_space, ids[i], part);
        out.push_back({parent, cache_block_size});
        left -= cache_block_size;
      }
      if (left > 0)
        return;  // a partial block is no block: its tokens are the request's own
    }
    return;
  }
  // The run's last id carries a part no single trace block has: chained like single blocks, a
  // merged block's name would equal the name of its last trace block in a file of another block
  // size sharing the id space (hash_scope global), a block with another parent.
  constexpr uint32_t merged_part = 0xffffffffu;
  const size_t group = cache_block_size / trace_block_size;
  for (size_t first = 0; first < id_count; first += group) {
    size_t last = std::min(first + group, id_count);
    block_hash h = parent;
    uint32_t tokens = 0;
    for (size_t i = first; i < last; ++i) {
      h = hash_trace_block(h, id_space, ids[i], i + 1 == first + group ? merged_part : 0);
      tokens += trace_tokens(i);
    }
    if (tokens < cache_block_size)
      return;  // a partial block is no block: its tokens are the request's own
    parent = h;
    out.push_back({parent, tokens});
  }
}

void map_token_blocks(const int32_t* tokens, size_t count, uint32_t cache_block_size,
                      std::vector<cache_block>& out) {
  KVTIER_ASSERT(cache_block_size > 0);
  block_hash parent = 0;
  for (size_t begin = 0; begin + cache_block_size <= count; begin += cache_block_size) {
    parent = hash_token_block(parent, tokens + begin, cache_block_size);
    out.push_back({parent, cache_block_size});
  }
}

}  // namespace kvtier
