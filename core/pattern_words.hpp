#pragma once

// The words of the integrity pattern: bytes derived from a block's hash, so that wherever a copy
// of the block lands it can be checked against what it must hold. The GPU backend fills KV
// chunks with them, in its kernels too (gpu/verify_pattern.hpp, `--verify`); the storage
// backends' payloads for runs without a GPU are made of them (storage/payload_pattern.hpp).

#include <cstdint>

#include "core/host_device.hpp"

namespace kvtier {

/// splitmix64's finalizer: a bijective mix, so neighbouring inputs give unrelated words.
KVTIER_HOST_DEVICE inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

/// Word `w` (8 bytes) of the sequence whose seed is `seed`.
KVTIER_HOST_DEVICE inline uint64_t pattern_word(uint64_t seed, uint64_t w) {
  return mix64(seed + (w + 1) * 0x9e3779b97f4a7c15ull);
}

}  // namespace kvtier
