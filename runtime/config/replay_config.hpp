#pragma once

// The typed settings of a replay, resolved from the config keys: capacities in blocks, parsed
// policies, the model's bytes per block, and the storage key namespace.

#include <cstdint>
#include <string>

#include "core/model_shape.hpp"
#include "core/model_spec.hpp"
#include "model/cache/cache_model.hpp"
#include "model/storage/storage_index.hpp"
#include "runtime/config/options.hpp"

namespace kvtier {

struct replay_config {
  uint32_t block_size = 0;
  cache_options cache;
  uint64_t storage_blocks = 0;  ///< 0: no storage tier
  uint32_t storage_nodes = 1;
  storage_pool_policy storage_pool;  ///< storage.eviction, watermarks, storage.lease_ms
  model_spec spec;         ///< the whole model (model.*)
  parallelism parallel;    ///< parallel.*
  model_shape model;       ///< the KV one rank caches: what a block holds and links move
  /// Mixed into every storage key: blocks of other models or KV dtypes never collide.
  uint64_t storage_namespace = 0;

  uint64_t block_bytes() const { return model.bytes_per_token() * block_size; }
};

/// Resolves and cross-checks the settings; throws config_error on an inconsistent config.
replay_config resolve(const config& c);

/// Resolves into `r` what a cluster.instances group may override (cache.*): the block size, the
/// tiers and their policies, and the storage tier's capacity in blocks of that size; the model
/// and the pool stay `r`'s. resolve() does this first.
void resolve_tiers(const config& c, replay_config& r);

}  // namespace kvtier
