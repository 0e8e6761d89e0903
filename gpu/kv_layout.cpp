#include "gpu/kv_layout.hpp"

#include "core/check.hpp"

namespace kvtier::gpu {

model_shape llama3_8b_kv() {
  model_shape s;
  s.name = "llama3-8b";
  s.layers = 32;
  s.kv_heads = 8;
  s.head_dim = 128;
  s.kv_dtype = "bf16";
  s.dtype_bytes = 2;
  return s;
}

uint64_t kv_layout::chunk_bytes() const {
  return uint64_t{block_size} * shape.kv_heads * shape.head_dim * shape.dtype_bytes;
}

std::optional<std::string> check_shape(const model_shape& shape, uint32_t block_size) {
  if (shape.latent_dim > 0)
    return "MLA's latent KV (" + std::to_string(shape.latent_dim) + " elements per layer and "
           "token) has no GPU layout yet: the GPU backend holds a K and a V per KV head";
  if (shape.layers == 0 || shape.kv_heads == 0 || shape.head_dim == 0 || block_size == 0
      || shape.dtype_bytes == 0)
    return "every dimension of the KV shape must be positive: " + describe(shape, block_size);
  if (shape.layers > max_layers)
    return "at most " + std::to_string(max_layers) + " layers (the kernels take one tensor "
           "address per layer): " + describe(shape, block_size);
  uint64_t chunk = kv_layout{shape, block_size}.chunk_bytes();
  if (chunk % 16 != 0)
    return "a KV chunk must be a multiple of 16 bytes, but " + describe(shape, block_size)
           + " gives " + std::to_string(chunk);
  return std::nullopt;
}

uint64_t kv_layout::tensor_offset(uint32_t layer, kv_half half) const {
  KVTIER_ASSERT(layer < shape.layers);
  return (2 * uint64_t{layer} + static_cast<uint32_t>(half)) * tensor_bytes();
}

uint64_t kv_layout::device_offset(uint32_t block, uint32_t layer, kv_half half) const {
  KVTIER_ASSERT(block < device_blocks);
  return tensor_offset(layer, half) + uint64_t{block} * chunk_bytes();
}

uint64_t kv_layout::host_offset(uint32_t block, uint32_t layer, kv_half half) const {
  KVTIER_ASSERT(block < host_blocks);
  KVTIER_ASSERT(layer < shape.layers);
  return uint64_t{block} * host_block_bytes() + uint64_t{layer} * slice_bytes()
         + static_cast<uint32_t>(half) * chunk_bytes();
}

std::string describe(const model_shape& shape, uint32_t block_size) {
  return std::to_string(shape.layers) + " layers x " + std::to_string(shape.kv_heads)
         + " kv heads x " + std::to_string(shape.head_dim) + " head dim, "
         + std::to_string(shape.dtype_bytes) + "-byte elements, "
         + std::to_string(block_size) + "-token blocks";
}

}  // namespace kvtier::gpu
