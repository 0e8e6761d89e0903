#pragma once

// What a model's KV cache looks like, per rank: the config's model.* keys, the shape an engine
// declares in hello (docs/protocol.md), what a remote controller tells the server, and what the
// GPU backend lays out in blocks (gpu/kv_layout.hpp, with the cache's block size beside it). One
// struct for all, passed whole, never copied field by field.

#include <cstdint>
#include <string>

namespace kvtier {

struct model_shape {
  std::string name;
  uint32_t layers = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
  std::string kv_dtype;
  /// bytes of one kv_dtype element (0 where only the name is known, and for 4-bit dtypes, whose
  /// elements pack below a byte: then packed_layer_bytes holds one layer's bytes)
  uint32_t dtype_bytes = 0;
  /// MLA: elements of the one latent a layer caches per token (no separate K and V); 0 otherwise
  uint32_t latent_dim = 0;
  /// MLA: the latent's two parts, as the keys model.kv_lora_rank and model.rope_head_dim name
  /// them (latent_dim is their sum); 0 otherwise, and where a peer's hello gave latent_dim alone
  uint32_t kv_lora_rank = 0;
  uint32_t rope_head_dim = 0;
  /// 4-bit KV: bytes one layer of one token takes, elements and their scales packed; 0 otherwise
  uint32_t packed_layer_bytes = 0;

  /// K and V (or MLA's latent) of every layer for one token.
  uint64_t bytes_per_token() const {
    if (packed_layer_bytes > 0)
      return uint64_t{layers} * packed_layer_bytes;
    if (latent_dim > 0)
      return uint64_t{layers} * latent_dim * dtype_bytes;
    return 2ull * layers * kv_heads * head_dim * dtype_bytes;
  }
};

}  // namespace kvtier
