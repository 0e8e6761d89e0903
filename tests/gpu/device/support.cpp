#include "support.hpp"

#include <map>

#include "gpu/bench/bench_blocks.hpp"

namespace kvtier::gpu::test {

kv_layout small_shape() {
  return layout_of(4, 2, 64, 16, 2);
}

kv_layout llama_shape(uint32_t block_size) {
  return layout_of(32, 8, 128, block_size, 2);
}

kv_cache_config make_config(const kv_layout& sizes, uint32_t device_blocks, uint32_t host_blocks) {
  kv_cache_config cfg;
  cfg.shape = sizes.shape;
  cfg.block_size = sizes.block_size;
  cfg.device_blocks = device_blocks;
  cfg.host_blocks = host_blocks;
  cfg.calibrate_compute = false;
  return cfg;
}

uint64_t device_hash(uint32_t block) {
  return mix64(0xd000000000ull + block);
}

uint64_t host_hash(uint32_t block) {
  return mix64(0x4000000000ull + block);
}

std::vector<block_pair> scattered_pairs(uint64_t seed, uint32_t count, const kv_layout& layout,
                                        bool host_consecutive) {
  // Half the ids in runs of 2..8, the rest single: every copy path of every method is taken.
  std::vector<uint32_t> devices = bench::shuffled_runs(seed, layout.device_blocks, 0.5, 8);
  std::vector<uint32_t> hosts;
  if (host_consecutive) {
    uint32_t first = static_cast<uint32_t>(mix64(seed) % (layout.host_blocks - count + 1));
    for (uint32_t k = 0; k < count; ++k)
      hosts.push_back(first + k);
  } else {
    hosts = bench::shuffled_runs(mix64(seed), layout.host_blocks, 0.5, 8);
  }
  std::vector<block_pair> pairs;
  for (uint32_t k = 0; k < count; ++k)
    pairs.push_back(block_pair{devices[k], hosts[k]});
  return pairs;
}

void fill_every_host_block(kv_cache& c) {
  for (uint32_t h = 0; h < c.layout().host_blocks; ++h)
    fill_host_block(c.host_block(h), c.layout(), host_hash(h));
}

void fill_every_device_block(kv_cache& c) {
  std::vector<block_pattern> blocks;
  for (uint32_t d = 0; d < c.layout().device_blocks; ++d)
    blocks.push_back(block_pattern{d, device_hash(d)});
  c.fill_device_blocks(blocks);
}

std::string check_devices_after_h2d(kv_cache& c, const std::vector<block_pair>& pairs) {
  std::map<uint32_t, uint32_t> source_of;
  for (const block_pair& p : pairs)
    source_of[p.device] = p.host;
  std::vector<block_pattern> blocks;
  for (uint32_t d = 0; d < c.layout().device_blocks; ++d) {
    auto it = source_of.find(d);
    blocks.push_back(block_pattern{d, it != source_of.end() ? host_hash(it->second)
                                                            : device_hash(d)});
  }
  auto bad = c.check_device_blocks(blocks);
  return bad ? to_string(*bad) : "";
}

std::string check_hosts_after_d2h(kv_cache& c, const std::vector<block_pair>& pairs) {
  std::map<uint32_t, uint32_t> source_of;
  for (const block_pair& p : pairs)
    source_of[p.host] = p.device;
  for (uint32_t h = 0; h < c.layout().host_blocks; ++h) {
    auto it = source_of.find(h);
    uint64_t hash = it != source_of.end() ? device_hash(it->second) : host_hash(h);
    if (auto bad = check_host_block(c.host_block(h), c.layout(), hash, h))
      return to_string(*bad);
  }
  return "";
}

}  // namespace kvtier::gpu::test
