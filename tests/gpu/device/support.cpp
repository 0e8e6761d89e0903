#include "support.hpp"

#include <algorithm>
#include <cstring>
#include <map>

namespace kvtier::gpu::test {

namespace {

class splitmix {
 public:
  explicit splitmix(uint64_t seed) : state_(seed) {}
  uint64_t next() { return mix64(state_ += 0x9e3779b97f4a7c15ull); }
  uint64_t below(uint64_t n) { return next() % n; }

 private:
  uint64_t state_;
};

/// All ids of a pool in a shuffled order of segments: 70% single ids, the rest runs of 2..8.
std::vector<uint32_t> shuffled_with_runs(splitmix& rng, uint32_t pool) {
  std::vector<block_run> segments;
  for (uint32_t i = 0; i < pool;) {
    uint32_t len = rng.below(10) < 7 ? 1 : 2 + static_cast<uint32_t>(rng.below(7));
    len = std::min(len, pool - i);
    segments.push_back(block_run{i, len});
    i += len;
  }
  for (size_t i = segments.size(); i > 1; --i)
    std::swap(segments[i - 1], segments[rng.below(i)]);
  std::vector<uint32_t> ids;
  for (const block_run& s : segments)
    for (uint32_t k = 0; k < s.count; ++k)
      ids.push_back(s.first + k);
  return ids;
}

}  // namespace

kv_shape small_shape() {
  return kv_shape{4, 2, 64, 16, 2};
}

kv_shape llama_shape(uint32_t block_size) {
  return kv_shape{32, 8, 128, block_size, 2};
}

kv_cache_config make_config(const kv_shape& shape, uint32_t device_blocks, uint32_t host_blocks) {
  kv_cache_config cfg;
  cfg.shape = shape;
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
  splitmix rng(seed);
  std::vector<uint32_t> devices = shuffled_with_runs(rng, layout.device_blocks);
  std::vector<uint32_t> hosts;
  if (host_consecutive) {
    uint32_t first = static_cast<uint32_t>(rng.below(layout.host_blocks - count + 1));
    for (uint32_t k = 0; k < count; ++k)
      hosts.push_back(first + k);
  } else {
    hosts = shuffled_with_runs(rng, layout.host_blocks);
  }
  std::vector<block_pair> pairs;
  for (uint32_t k = 0; k < count; ++k)
    pairs.push_back(block_pair{devices[k], hosts[k]});
  return pairs;
}

void fill_every_host_block(kv_cache& c) {
  for (uint32_t h = 0; h < c.layout().host_blocks; ++h)
    fill_host_block(c.host_block(h), c.layout().shape, host_hash(h));
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
    if (auto bad = check_host_block(c.host_block(h), c.layout().shape, hash, h))
      return to_string(*bad);
  }
  return "";
}

}  // namespace kvtier::gpu::test
