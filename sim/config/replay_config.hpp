#pragma once

// The typed settings of a replay, resolved from the config keys: capacities in blocks, parsed
// policies, the model's bytes per block, and the storage key namespace.

#include <cstdint>
#include <string>

#include "actors/cache_controller/cache_model.hpp"
#include "actors/storage/storage_index.hpp"
#include "sim/config/options.hpp"

namespace kvtier {

struct model_shape {
  std::string name;
  uint32_t layers = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
  std::string kv_dtype;
  uint32_t dtype_bytes = 0;

  /// K and V of every layer for one token.
  uint64_t bytes_per_token() const {
    return 2ull * layers * kv_heads * head_dim * dtype_bytes;
  }
};

struct replay_config {
  uint32_t block_size = 0;
  cache_options cache;
  uint64_t storage_blocks = 0;  ///< 0: no storage tier
  uint32_t storage_nodes = 1;
  storage_pool_policy storage_pool;  ///< storage.eviction, watermarks, storage.lease_ms
  model_shape model;
  /// Mixed into every storage key: blocks of other models or KV dtypes never collide.
  uint64_t storage_namespace = 0;

  uint64_t block_bytes() const { return model.bytes_per_token() * block_size; }
};

/// Resolves and cross-checks the settings; throws config_error on an inconsistent config.
replay_config resolve(const config& c);

}  // namespace kvtier
