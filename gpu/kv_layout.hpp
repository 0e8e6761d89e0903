#pragma once

// Shape and byte layout of the KV cache on the device and in pinned host memory.
//
// Device (FastDeploy's layout): per layer one K and one V tensor, each [device_blocks][chunk], so
// one (layer, K|V, block) is one contiguous chunk. The 2 * layers tensors are carved out of one
// allocation, tensor t = 2 * layer + half:
//
//   device: | L0.K: b0 b1 b2 .. | L0.V: b0 b1 .. | L1.K: .. | .. | L(n-1).V: .. |
//
// Host (block-major): one host block holds every layer of one block, K beside V, so a whole
// block is one contiguous span and a (block, layer) "slice" of K|V is 2 * chunk contiguous bytes:
//
//   host:   | h0: L0.K L0.V L1.K L1.V .. | h1: L0.K L0.V .. | ..
//
// A D2H of whole blocks therefore writes long contiguous host spans, while an H2D of one layer
// reads one slice per block, host_block_bytes() apart.

#include <cstdint>
#include <optional>
#include <string>

#include "core/model_shape.hpp"

namespace kvtier::gpu {

/// Which half of a layer's KV a chunk holds.
enum class kv_half : uint32_t { key = 0, value = 1 };

/// The most layers a shape may have: the kernels take one tensor address per layer by value.
inline constexpr uint32_t max_layers = 256;

/// Llama-3-8B's KV in bf16 (32 layers x 8 KV heads x 128 head dim): the shape the GPU tests and
/// the transfer bench use unless given the config's model.
model_shape llama3_8b_kv();

/// Returns why the KV of `shape` (core/model_shape.hpp) in blocks of `block_size` tokens cannot
/// be laid out, if it cannot: every dimension must be positive, a chunk a multiple of 16 bytes
/// (the width of the copy kernels' accesses), and the KV a K and a V per head: MLA's latent
/// (`latent_dim`) has no layout here yet.
std::optional<std::string> check_shape(const model_shape& shape, uint32_t block_size);

/// Byte offsets of chunks in the device arena and the host pool: the KV one rank caches
/// (`shape`, the model's, never copied field by field) in blocks of `block_size` tokens.
struct kv_layout {
  model_shape shape;
  uint32_t block_size = 0;  ///< tokens per block
  uint32_t device_blocks = 0;
  uint32_t host_blocks = 0;

  /// Bytes of one (layer, K|V, block): block_size x kv_heads x head_dim elements.
  uint64_t chunk_bytes() const;
  /// Bytes of one (layer, block) on the host: K and V side by side.
  uint64_t slice_bytes() const { return 2 * chunk_bytes(); }
  /// Bytes of one host block: every layer's slice.
  uint64_t host_block_bytes() const { return shape.layers * slice_bytes(); }

  /// Bytes of one device tensor (one layer's K or V for every device block).
  uint64_t tensor_bytes() const { return uint64_t{device_blocks} * chunk_bytes(); }
  uint64_t device_bytes() const { return 2 * uint64_t{shape.layers} * tensor_bytes(); }
  uint64_t host_bytes() const { return uint64_t{host_blocks} * host_block_bytes(); }

  /// Offset of the tensor of (layer, half) in the device arena.
  uint64_t tensor_offset(uint32_t layer, kv_half half) const;
  /// Offset of the chunk of (device block, layer, half) in the device arena.
  uint64_t device_offset(uint32_t block, uint32_t layer, kv_half half) const;
  /// Offset of the chunk of (host block, layer, half) in the host pool.
  uint64_t host_offset(uint32_t block, uint32_t layer, kv_half half) const;
};

/// "32 layers x 8 kv heads x 128 head dim, 2-byte elements, 16-token blocks".
std::string describe(const model_shape& shape, uint32_t block_size);

}  // namespace kvtier::gpu
