#pragma once

// What a model's KV cache looks like: the config's model.* keys, the shape an engine declares in
// hello (docs/protocol.md), and what a remote controller tells the server. One struct for all.

#include <cstdint>
#include <string>

namespace kvtier {

struct model_shape {
  std::string name;
  uint32_t layers = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
  std::string kv_dtype;
  uint32_t dtype_bytes = 0;  ///< bytes of one kv_dtype element (0 where only the name is known)

  /// K and V of every layer for one token.
  uint64_t bytes_per_token() const {
    return 2ull * layers * kv_heads * head_dim * dtype_bytes;
  }
};

}  // namespace kvtier
