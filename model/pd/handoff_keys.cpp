#include "model/pd/handoff_keys.hpp"

#include <algorithm>

#include <xxhash.h>

#include "model/storage/storage_index.hpp"

namespace kvtier {

uint64_t partial_block_key(uint64_t storage_namespace, block_hash prefix, uint64_t tokens) {
  // A hash over ("partial", prefix, n): the text keeps it apart from every chained block hash.
  struct {
    char tag[8] = {'p', 'a', 'r', 't', 'i', 'a', 'l', ':'};
    uint64_t prefix;
    uint64_t tokens;
  } key{};
  key.prefix = prefix;
  key.tokens = tokens;
  return make_storage_key(storage_namespace, XXH3_64bits(&key, sizeof key));
}

std::vector<uint64_t> handoff_keys(const std::vector<cache_block>& blocks, uint32_t block_size,
                                   uint64_t prompt_tokens, uint64_t storage_namespace) {
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
      keys.push_back(partial_block_key(storage_namespace, prefix, end));
    }
  }
  while (end < prompt_tokens) {
    end = std::min<uint64_t>(end + block_size, prompt_tokens);
    keys.push_back(partial_block_key(storage_namespace, prefix, end));
  }
  return keys;
}

}  // namespace kvtier
