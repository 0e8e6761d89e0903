#pragma once

// Shape and byte layout of the KV cache on the device and in pinned host memory.
//
// A chunk is what one layer caches of one block in one tensor: K or V (block_size x kv_heads x
// head_dim elements), or, for MLA, the one latent (block_size x latent_dim elements). A layer
// has two halves (K and V) or one (MLA's latent).
//
// Device: per layer, the chunk of (block, half) lies at
//
//   layer base + half x half_stride + block x block_stride
//
// (`tensor_strides`). The default strides are FastDeploy's layout and vLLM's FlashAttention
// layout, [2, device_blocks, block_size, kv_heads, head_dim] per layer: one K and one V tensor,
// each [device_blocks][chunk]. MLA's latent, [device_blocks, block_size, latent_dim] per layer,
// is the same with one half. Other engines' strides (FlashInfer's [device_blocks, 2, ...]: K
// beside V in each block) are given explicitly. A cache that owns its memory carves the
// halves x layers tensors of the default layout out of one allocation, tensor
// t = halves x layer + half:
//
//   device: | L0.K: b0 b1 b2 .. | L0.V: b0 b1 .. | L1.K: .. | .. | L(n-1).V: .. |
//
// Host (block-major): one host block holds every layer of one block, K beside V, so a whole
// block is one contiguous span and a (block, layer) "slice" of K|V (or the latent) is
// halves x chunk contiguous bytes:
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

/// Which half of a layer's KV a chunk holds (MLA's latent is its only half, `key`).
enum class kv_half : uint32_t { key = 0, value = 1 };

/// The most layers a shape may have: the kernels take one tensor address per layer by value.
inline constexpr uint32_t max_layers = 256;

/// Llama-3-8B's KV in bf16 (32 layers x 8 KV heads x 128 head dim): the shape the GPU tests and
/// the transfer bench use unless given the config's model.
model_shape llama3_8b_kv();

/// Returns why the KV of `shape` (core/model_shape.hpp) in blocks of `block_size` tokens cannot
/// be laid out, if it cannot: every dimension must be positive (latent_dim instead of kv_heads
/// and head_dim for MLA), and a chunk a multiple of 16 bytes (the width of the copy kernels'
/// accesses).
std::optional<std::string> check_shape(const model_shape& shape, uint32_t block_size);

/// Where an engine's tensors put a layer's chunks, in bytes from the layer's base: chunk
/// (block, half) at half x `half` + block x `block`. Zero: the default layout's (K and V
/// tensors each [device_blocks][chunk]: half = device_blocks x chunk, block = chunk).
struct tensor_strides {
  uint64_t half = 0;
  uint64_t block = 0;

  bool operator==(const tensor_strides& o) const { return half == o.half && block == o.block; }
};

/// Byte offsets of chunks in the device tensors and the host pool: the KV one rank caches
/// (`shape`, the model's, never copied field by field) in blocks of `block_size` tokens.
struct kv_layout {
  model_shape shape;
  uint32_t block_size = 0;  ///< tokens per block
  uint32_t device_blocks = 0;
  uint32_t host_blocks = 0;
  tensor_strides strides{};  ///< of the device tensors; zeros: the default layout

  /// 2 (K and V) or 1 (MLA's latent).
  uint32_t halves() const { return shape.latent_dim > 0 ? 1 : 2; }
  /// Elements one token caches per layer and half: kv_heads x head_dim, or latent_dim.
  uint64_t token_elements() const;
  /// Bytes of one (layer, half, block): block_size x token_elements() elements.
  uint64_t chunk_bytes() const;
  /// Bytes of one (layer, block) on the host: its halves side by side.
  uint64_t slice_bytes() const { return halves() * chunk_bytes(); }
  /// Bytes of one host block: every layer's slice.
  uint64_t host_block_bytes() const { return shape.layers * slice_bytes(); }

  /// Bytes of one device tensor of the default layout (one layer's K, V or latent for every
  /// device block).
  uint64_t tensor_bytes() const { return uint64_t{device_blocks} * chunk_bytes(); }
  /// Bytes of the arena a cache that owns its memory allocates.
  uint64_t device_bytes() const { return uint64_t{halves()} * shape.layers * tensor_bytes(); }
  uint64_t host_bytes() const { return uint64_t{host_blocks} * host_block_bytes(); }

  /// The strides in effect (the defaults where `strides` holds zeros).
  uint64_t half_stride() const { return strides.half ? strides.half : tensor_bytes(); }
  uint64_t block_stride() const { return strides.block ? strides.block : chunk_bytes(); }
  /// Whether the device tensors are the default layout's: a run of consecutive blocks is then
  /// one contiguous span of each tensor (direct copies, offsets in the arena).
  bool default_strides() const;
  /// Offset of the chunk of (block, half) from its layer's base (any strides).
  uint64_t layer_offset(uint32_t block, kv_half half) const;
  /// Bytes from a layer's base to the end of its last chunk (any strides).
  uint64_t layer_span() const;

  /// Offset of the tensor of (layer, half) in the arena (default layout).
  uint64_t tensor_offset(uint32_t layer, kv_half half) const;
  /// Offset of the chunk of (device block, layer, half) in the arena (default layout).
  uint64_t device_offset(uint32_t block, uint32_t layer, kv_half half) const;
  /// Offset of the chunk of (host block, layer, half) in the host pool.
  uint64_t host_offset(uint32_t block, uint32_t layer, kv_half half) const;
};

/// Returns why the layout's device strides cannot hold its chunks, if they cannot: each a
/// multiple of 16 bytes, and no two chunks of a layer overlapping (K and V tensors one after
/// the other, or K beside V in each block).
std::optional<std::string> check_strides(const kv_layout& layout);

/// "32 layers x 8 kv heads x 128 head dim, 2-byte elements, 16-token blocks", or
/// "61 layers x 576 latent dim (MLA), ...".
std::string describe(const model_shape& shape, uint32_t block_size);

}  // namespace kvtier::gpu
