#pragma once

// Where a handed-off request's blocks live in the storage pool (pd.transfer = storage). A full
// listed block is stored under its own key, the one every instance's prefix lookup asks for, so
// other instances hit on it later. The partial last block, and prompt blocks no trace id names,
// are stored under `{prefix hash}:partial:{n}` (n: the prompt tokens up to the block's end), a key
// no lookup ever forms: a partial block is never matched as a shared prefix. As FastDeploy PR
// #7839 hashes the partial block's tokens into it (docs/fastdeploy.md §6), the key also holds the
// block's content: two prompts that share the prefix and the length but not the tail never share
// a partial key.

#include <cstdint>
#include <vector>

#include "core/block_hash.hpp"
#include "core/trace_request.hpp"

namespace kvtier {

/// The storage key of each block holding the first `prompt_tokens` tokens of the request `req`
/// whose listed blocks are `blocks` (blocks of `block_size` tokens past them).
std::vector<uint64_t> handoff_keys(const std::vector<cache_block>& blocks, uint32_t block_size,
                                   uint64_t prompt_tokens, uint64_t storage_namespace,
                                   const trace_request& req);

/// The key of a partial block holding prompt tokens up to `tokens`, after `prefix`, whose own
/// tokens are `content` (partial_content()).
uint64_t partial_block_key(uint64_t storage_namespace, block_hash prefix, uint64_t tokens,
                           uint64_t content);

/// What a block of `req` holding its tokens [begin, end) contains, as far as the trace tells:
/// the hash of those token ids where the trace lists them, else the request itself (tokens no
/// trace names, generated ones included, are the request's own).
uint64_t partial_content(const trace_request& req, uint64_t begin, uint64_t end);

}  // namespace kvtier
