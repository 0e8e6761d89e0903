#include "gpu/verify_pattern.hpp"

#include <cstdio>
#include <cstring>

namespace kvtier::gpu {

namespace {

std::string hex(uint64_t x) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(x));
  return buf;
}

}  // namespace

std::string to_string(const verify_mismatch& m) {
  return std::string("verify: ") + (m.on_device ? "device" : "host") + " block "
         + std::to_string(m.block) + ", layer " + std::to_string(m.layer)
         + (m.half == kv_half::key ? " K" : " V") + ", byte " + std::to_string(m.byte_offset)
         + ": expected " + hex(m.expected) + ", found " + hex(m.found) + " (block hash "
         + hex(m.hash) + ")";
}

void fill_host_block(std::byte* block, const kv_layout& layout, uint64_t hash) {
  uint64_t words = layout.chunk_bytes() / 8;
  for (uint32_t layer = 0; layer < layout.shape.layers; ++layer) {
    for (kv_half half : {kv_half::key, kv_half::value}) {
      uint64_t seed = chunk_seed(hash, layer, half);
      std::byte* chunk = block + (2 * uint64_t{layer} + static_cast<uint32_t>(half))
                                     * layout.chunk_bytes();
      for (uint64_t w = 0; w < words; ++w) {
        uint64_t v = pattern_word(seed, w);
        std::memcpy(chunk + 8 * w, &v, 8);
      }
    }
  }
}

std::optional<verify_mismatch> check_host_block(const std::byte* block, const kv_layout& layout,
                                                uint64_t hash, uint32_t block_id) {
  uint64_t words = layout.chunk_bytes() / 8;
  for (uint32_t layer = 0; layer < layout.shape.layers; ++layer) {
    for (kv_half half : {kv_half::key, kv_half::value}) {
      uint64_t seed = chunk_seed(hash, layer, half);
      const std::byte* chunk = block + (2 * uint64_t{layer} + static_cast<uint32_t>(half))
                                           * layout.chunk_bytes();
      for (uint64_t w = 0; w < words; ++w) {
        uint64_t found;
        std::memcpy(&found, chunk + 8 * w, 8);
        uint64_t expected = pattern_word(seed, w);
        if (found != expected)
          return verify_mismatch{false, block_id, layer, half, 8 * w, hash, expected, found};
      }
    }
  }
  return std::nullopt;
}

}  // namespace kvtier::gpu
