#include "runtime/config/replay_config.hpp"

#include <xxhash.h>

#include "core/time_math.hpp"
#include "runtime/config/compute_config.hpp"

namespace kvtier {

namespace {

uint64_t blocks_of(const config& c, integer_key tokens_key, integer_key blocks_key,
                   uint32_t block_size, uint64_t limit) {
  uint64_t blocks = 0;
  if (c.is_set(blocks_key))
    blocks = static_cast<uint64_t>(c.integer(blocks_key));
  else if (c.is_set(tokens_key))
    blocks = static_cast<uint64_t>(c.integer(tokens_key)) / block_size;
  else
    throw config_error(std::string("set ") + tokens_key.name + " or " + blocks_key.name);
  if (blocks > limit)
    throw config_error(std::string(tokens_key.name) + " / " + blocks_key.name + ": " +
                       std::to_string(blocks) + " blocks is more than the " +
                       std::to_string(limit) + " supported");
  return blocks;
}

}  // namespace

void resolve_tiers(const config& c, replay_config& r) {
  r.block_size = static_cast<uint32_t>(c.integer(keys::cache::block_size));
  const uint64_t u32 = 0xffffffffull;
  r.cache.device_blocks = static_cast<uint32_t>(
    blocks_of(c, keys::cache::device_tokens, keys::cache::device_blocks, r.block_size, u32));
  r.cache.host_blocks = static_cast<uint32_t>(
    blocks_of(c, keys::cache::host_tokens, keys::cache::host_blocks, r.block_size, u32));
  if (r.cache.device_blocks == 0)
    throw config_error("cache.device_tokens / cache.device_blocks: the device tier needs at "
                       "least one block of cache.block_size tokens");
  r.cache.eviction =
    c.text(keys::cache::eviction) == "lfu" ? eviction_policy::lfu : eviction_policy::lru;
  r.cache.policy = *parse_write_policy(c.text(keys::cache::write_policy));
  r.cache.write_through_threshold =
    static_cast<uint32_t>(c.integer(keys::cache::write_through_threshold));
  r.cache.storage = *parse_storage_write(c.text(keys::cache::storage_write));
  r.cache.storage_write_threshold =
    static_cast<uint32_t>(c.integer(keys::cache::storage_write_threshold));
  r.cache.write_back_keeps_host_copy = c.text(keys::cache::write_back_host_copy) == "keep";
  r.cache.caching =
    c.boolean(keys::cache::prefix_caching) ? prefix_caching::on : prefix_caching::off;
  r.storage_blocks =
    blocks_of(c, keys::storage::capacity_tokens, keys::storage::capacity_blocks, r.block_size,
              u32);
  r.cache.storage_tier = r.storage_blocks > 0;
  if (r.cache.storage_tier && r.cache.host_blocks == 0)
    throw config_error("storage.capacity_*: a storage tier needs a host tier (blocks read from "
                       "storage land in host memory); set cache.host_tokens or "
                       "storage.capacity_tokens=0");
}

replay_config resolve(const config& c) {
  replay_config r;
  resolve_tiers(c, r);
  r.storage_nodes = static_cast<uint32_t>(c.integer(keys::storage::nodes));
  r.storage_pool.eviction = c.text(keys::storage::eviction) == "watermark"
                              ? storage_eviction::watermark
                              : storage_eviction::lru;
  r.storage_pool.high_watermark = c.number(keys::storage::high_watermark);
  r.storage_pool.evict_fraction = c.number(keys::storage::evict_fraction);
  r.storage_pool.lease_ns = time_from(c.number(keys::storage::lease_ms) * 1e6);
  r.spec = resolve_model_spec(c);
  r.parallel = resolve_parallelism(c, r.spec);
  r.model = shape_per_rank(r.spec, r.parallel);
  fit_device_tier(c, r);
  std::string ns = r.model.name + '\0' + r.model.kv_dtype;
  r.storage_namespace = XXH3_64bits(ns.data(), ns.size());
  return r;
}

}  // namespace kvtier
