#include "gpu/kv_layout.hpp"

#include "core/check.hpp"

namespace kvtier::gpu {

uint64_t kv_shape::chunk_bytes() const {
  return uint64_t{block_size} * kv_heads * head_dim * dtype_bytes;
}

std::optional<std::string> check_shape(const kv_shape& shape) {
  if (shape.layers == 0 || shape.kv_heads == 0 || shape.head_dim == 0 || shape.block_size == 0
      || shape.dtype_bytes == 0)
    return "every dimension of the KV shape must be positive: " + describe(shape);
  if (shape.layers > max_layers)
    return "at most " + std::to_string(max_layers) + " layers (the kernels take one tensor "
           "address per layer): " + describe(shape);
  if (shape.chunk_bytes() % 16 != 0)
    return "a KV chunk must be a multiple of 16 bytes, but " + describe(shape) + " gives "
           + std::to_string(shape.chunk_bytes());
  return std::nullopt;
}

uint64_t kv_layout::tensor_offset(uint32_t layer, kv_half half) const {
  KVTIER_ASSERT(layer < shape.layers);
  return (2 * uint64_t{layer} + static_cast<uint32_t>(half)) * tensor_bytes();
}

uint64_t kv_layout::device_offset(uint32_t block, uint32_t layer, kv_half half) const {
  KVTIER_ASSERT(block < device_blocks);
  return tensor_offset(layer, half) + uint64_t{block} * shape.chunk_bytes();
}

uint64_t kv_layout::host_offset(uint32_t block, uint32_t layer, kv_half half) const {
  KVTIER_ASSERT(block < host_blocks);
  KVTIER_ASSERT(layer < shape.layers);
  return uint64_t{block} * shape.host_block_bytes() + uint64_t{layer} * shape.slice_bytes()
         + static_cast<uint32_t>(half) * shape.chunk_bytes();
}

std::string describe(const kv_shape& shape) {
  return std::to_string(shape.layers) + " layers x " + std::to_string(shape.kv_heads)
         + " kv heads x " + std::to_string(shape.head_dim) + " head dim, "
         + std::to_string(shape.dtype_bytes) + "-byte elements, "
         + std::to_string(shape.block_size) + "-token blocks";
}

}  // namespace kvtier::gpu
