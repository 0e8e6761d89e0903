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

uint64_t kv_layout::token_elements() const {
  return shape.latent_dim > 0 ? uint64_t{shape.latent_dim}
                              : uint64_t{shape.kv_heads} * shape.head_dim;
}

uint64_t kv_layout::chunk_bytes() const {
  return uint64_t{block_size} * token_elements() * shape.dtype_bytes;
}

std::optional<std::string> check_shape(const model_shape& shape, uint32_t block_size) {
  bool heads = shape.latent_dim > 0 || (shape.kv_heads > 0 && shape.head_dim > 0);
  if (shape.layers == 0 || !heads || block_size == 0 || shape.dtype_bytes == 0)
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

bool kv_layout::default_strides() const {
  return half_stride() == tensor_bytes() && block_stride() == chunk_bytes();
}

uint64_t kv_layout::layer_offset(uint32_t block, kv_half half) const {
  KVTIER_ASSERT(block < device_blocks);
  KVTIER_ASSERT(static_cast<uint32_t>(half) < halves());
  return static_cast<uint32_t>(half) * half_stride() + uint64_t{block} * block_stride();
}

uint64_t kv_layout::layer_span() const {
  if (device_blocks == 0)
    return 0;
  return layer_offset(device_blocks - 1, halves() == 2 ? kv_half::value : kv_half::key)
         + chunk_bytes();
}

std::optional<std::string> check_strides(const kv_layout& l) {
  uint64_t chunk = l.chunk_bytes(), hs = l.half_stride(), bs = l.block_stride();
  auto shown = [&] {
    return "half stride " + std::to_string(hs) + " bytes, block stride " + std::to_string(bs)
           + " bytes, " + std::to_string(chunk) + "-byte chunks, " + std::to_string(l.device_blocks)
           + " blocks";
  };
  if (hs % 16 != 0 || bs % 16 != 0)
    return "tensor strides must be multiples of 16 bytes: " + shown();
  if (bs < chunk)
    return "the block stride is shorter than a chunk, so blocks overlap: " + shown();
  if (l.halves() == 1 || l.device_blocks == 0)
    return std::nullopt;
  // K then V: the V tensor starts after K's last chunk. K beside V: V lies between a block's
  // K and the next block's.
  bool k_then_v = hs >= (uint64_t{l.device_blocks} - 1) * bs + chunk;
  bool interleaved = hs >= chunk && bs >= hs + chunk;
  if (!k_then_v && !interleaved)
    return "K and V chunks overlap (V must follow every K chunk, or lie beside each block's K): "
           + shown();
  return std::nullopt;
}

uint64_t kv_layout::tensor_offset(uint32_t layer, kv_half half) const {
  KVTIER_ASSERT(layer < shape.layers);
  KVTIER_ASSERT(static_cast<uint32_t>(half) < halves());
  return (uint64_t{halves()} * layer + static_cast<uint32_t>(half)) * tensor_bytes();
}

uint64_t kv_layout::device_offset(uint32_t block, uint32_t layer, kv_half half) const {
  KVTIER_ASSERT(block < device_blocks);
  return tensor_offset(layer, half) + uint64_t{block} * chunk_bytes();
}

uint64_t kv_layout::host_offset(uint32_t block, uint32_t layer, kv_half half) const {
  KVTIER_ASSERT(block < host_blocks);
  KVTIER_ASSERT(layer < shape.layers);
  KVTIER_ASSERT(static_cast<uint32_t>(half) < halves());
  return uint64_t{block} * host_block_bytes() + uint64_t{layer} * slice_bytes()
         + static_cast<uint32_t>(half) * chunk_bytes();
}

std::string describe(const model_shape& shape, uint32_t block_size) {
  std::string heads = shape.latent_dim > 0
                        ? std::to_string(shape.latent_dim) + " latent dim (MLA)"
                        : std::to_string(shape.kv_heads) + " kv heads x "
                            + std::to_string(shape.head_dim) + " head dim";
  return std::to_string(shape.layers) + " layers x " + heads + ", "
         + std::to_string(shape.dtype_bytes) + "-byte elements, "
         + std::to_string(block_size) + "-token blocks";
}

}  // namespace kvtier::gpu
