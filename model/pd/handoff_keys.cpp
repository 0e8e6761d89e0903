#include "model/pd/handoff_keys.hpp"

#include <algorithm>

#include <xxhash.h>

#include "model/storage/storage_index.hpp"

namespace kvtier {

uint64_t partial_block_key(uint64_t storage_namespace, block_hash prefix, uint64_t tokens,
                           uint64_t content) {
  // A hash over ("partial", prefix, n, content): the text keeps it apart from every chained
  // block hash.
  struct {
    char tag[8] = {'p', 'a', 'r', 't', 'i', 'a', 'l', ':'};
    uint64_t prefix;
    uint64_t tokens;
    uint64_t content;
  } key{};
  key.prefix = prefix;
  key.tokens = tokens;
  key.content = content;
  return make_storage_key(storage_namespace, XXH3_64bits(&key, sizeof key));
}

uint64_t partial_content(const trace_request& req, uint64_t begin, uint64_t end) {
  if (end <= req.tokens.size() && begin < end)
    return XXH3_64bits(req.tokens.data() + begin, (end - begin) * sizeof(int32_t));
  // Seeded apart from the token hashes: a request id never reads as a block of tokens.
  return XXH3_64bits_withSeed(&req.seq, sizeof req.seq, 0x72657175657374);  // "request"
}

std::vector<uint64_t> handoff_keys(const std::vector<cache_block>& blocks, uint32_t block_size,
                                   uint64_t prompt_tokens, uint64_t storage_namespace,
                                   const trace_request& req) {
  std::vector<uint64_t> keys;
  uint64_t end = 0;
  block_hash prefix = 0;
  for (const cache_block& b : blocks) {
    if (end >= prompt_tokens)
      return keys;
    end += b.tokens;
    if (b.tokens == block_size) {
      keys.push_back(make_storage_key(storage_namespace, b.hash));
      prefix = b.hash;
    } else {
      // A listed partial block: its chained hash names its content.
      keys.push_back(partial_block_key(storage_namespace, prefix, end, b.hash));
    }
  }
  while (end < prompt_tokens) {
    uint64_t begin = end;
    end = std::min<uint64_t>(end + block_size, prompt_tokens);
    keys.push_back(
      partial_block_key(storage_namespace, prefix, end, partial_content(req, begin, end)));
  }
  return keys;
}

}  // namespace kvtier
