#pragma once

// How readers name id spaces and sessions so that several trace files never collide by accident:
// block ids are local to a file unless the file declares them global, and sessions always are.

#include <cstdint>

namespace kvtier {

/// SplitMix64's finalizer: a bijection on 64 bits, so distinct inputs give distinct spaces.
constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// The id space of the block ids of file number `file_index` (ids local to that file).
constexpr uint64_t file_id_space(uint32_t file_index) {
  return splitmix64(uint64_t{file_index} + 1);
}

/// The id space shared by every file whose ids are global (native "hash_scope": "global"); no
/// file's own space equals it.
constexpr uint64_t global_id_space = splitmix64(0);

/// Session `number` (from 1) of file number `file_index`: never 0, unique across files.
constexpr uint64_t file_session_id(uint32_t file_index, uint32_t number) {
  return (uint64_t{file_index} + 1) << 32 | number;
}

}  // namespace kvtier
