#pragma once

// How the server names an engine's blocks in its own index. The engine names each block by
// kvtier's chained hash (docs/protocol.md); the server chains those names once more onto its own
// names, so that the name it keeps for block i is fixed by every engine name up to i. An engine
// whose hashes do not chain (the same hash at two positions, a hash reused under another
// prefix) then gets blocks of its own instead of corrupting the index, whose radix tree relies
// on a name fixing its prefix. Equal engine chains give equal server names, so engines that hash
// alike share blocks as before. Storage keys (and the file backend's file names) come from these
// names.

#include <cstdint>
#include <vector>

#include "core/block_hash.hpp"

namespace kvtier::serve {

/// The id space of engine-given names ("serve").
inline constexpr uint64_t engine_name_space = 0x7365727665ULL;

/// Replaces each block's engine hash with the server's name for it.
inline void name_engine_blocks(std::vector<cache_block>& blocks) {
  block_hash parent = 0;
  for (cache_block& b : blocks) {
    parent = hash_trace_block(parent, engine_name_space, b.hash, b.tokens);
    b.hash = parent;
  }
}

}  // namespace kvtier::serve
