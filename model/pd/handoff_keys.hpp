#pragma once

// Where a handed-off request's blocks live in the storage pool (pd.transfer = storage). A full
// listed block is stored under its own key, the one every instance's prefix lookup asks for, so
// other instances hit on it later. The partial last block, and prompt blocks no trace id names,
// are stored under `{prefix hash}:partial:{n}` (n: the prompt tokens up to the block's end), a key
// no lookup ever forms: a partial block is never matched as a shared prefix.

#include <cstdint>
#include <vector>

#include "core/block_hash.hpp"

namespace kvtier {

/// The storage key of each block holding the first `prompt_tokens` tokens of a request whose
/// listed blocks are `blocks` (blocks of `block_size` tokens past them).
std::vector<uint64_t> handoff_keys(const std::vector<cache_block>& blocks, uint32_t block_size,
                                   uint64_t prompt_tokens, uint64_t storage_namespace);

/// The key of a partial block holding prompt tokens up to `tokens`, after `prefix`.
uint64_t partial_block_key(uint64_t storage_namespace, block_hash prefix, uint64_t tokens);

}  // namespace kvtier
