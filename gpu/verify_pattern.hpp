#pragma once

// Integrity checking (`--verify`): when a block is produced, every chunk of it (each layer, K and
// V) is filled with words derived from (block hash, layer, half, word index); wherever the block
// is copied, the copy is checked against the words for the hash it should hold. Any lost,
// misplaced, stale or torn chunk then shows up, named by block and layer. The same functions run
// in the device kernels and on the CPU over pinned host memory.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "core/host_device.hpp"
#include "core/pattern_words.hpp"
#include "gpu/kv_layout.hpp"

namespace kvtier::gpu {

using kvtier::mix64;
using kvtier::pattern_word;

/// The seed of one chunk's words: each (hash, layer, half) gets its own sequence.
KVTIER_HOST_DEVICE inline uint64_t chunk_seed(uint64_t hash, uint32_t layer, kv_half half) {
  uint64_t place = (uint64_t{layer} << 1) | static_cast<uint32_t>(half);
  return mix64(hash ^ mix64(place + 0x9e3779b97f4a7c15ull));
}

/// Where a checked block differs from its pattern: the first differing word of the first chunk.
struct verify_mismatch {
  bool on_device = false;
  uint32_t block = 0;
  uint32_t layer = 0;
  kv_half half = kv_half::key;
  uint64_t byte_offset = 0;  ///< of the word within its chunk
  uint64_t hash = 0;         ///< what the block should hold
  uint64_t expected = 0;
  uint64_t found = 0;
};

/// "verify: device block 17, layer 3 V, byte 4096: expected 0x.., found 0x.. (block hash 0x..)".
std::string to_string(const verify_mismatch& m);

/// Fills the host block at `block` (host_block_bytes() of the layout) with the pattern of `hash`.
void fill_host_block(std::byte* block, const kv_layout& layout, uint64_t hash);

/// Checks the host block `block_id` at `block` against the pattern of `hash`.
std::optional<verify_mismatch> check_host_block(const std::byte* block, const kv_layout& layout,
                                                uint64_t hash, uint32_t block_id);

}  // namespace kvtier::gpu
