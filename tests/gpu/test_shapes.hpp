#pragma once

// Small KV shapes for the GPU tests: the model's shape (core/model_shape.hpp) laid out in blocks.

#include "gpu/kv_layout.hpp"

namespace kvtier::gpu::test {

inline model_shape kv_of(uint32_t layers, uint32_t kv_heads, uint32_t head_dim,
                         uint32_t dtype_bytes) {
  model_shape s;
  s.layers = layers;
  s.kv_heads = kv_heads;
  s.head_dim = head_dim;
  s.dtype_bytes = dtype_bytes;
  return s;
}

/// `layers` x `kv_heads` x `head_dim` of `dtype_bytes`-byte elements in `block_size`-token
/// blocks, with `device_blocks` and `host_blocks` of them (none: the sizes only).
inline kv_layout layout_of(uint32_t layers, uint32_t kv_heads, uint32_t head_dim,
                           uint32_t block_size, uint32_t dtype_bytes, uint32_t device_blocks = 0,
                           uint32_t host_blocks = 0) {
  return {kv_of(layers, kv_heads, head_dim, dtype_bytes), block_size, device_blocks, host_blocks};
}

}  // namespace kvtier::gpu::test
