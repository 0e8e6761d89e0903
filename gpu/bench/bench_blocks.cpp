#include "gpu/bench/bench_blocks.hpp"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <thread>

namespace kvtier::gpu::bench {

namespace {

constexpr uint8_t poison_byte = 0xa5;
constexpr uint64_t device_tag = 1;
constexpr uint64_t host_tag = 2;
constexpr uint32_t cpu_threads_max = 16;

/// The bench's own PRNG (splitmix64): the same placement for a seed on every platform.
class splitmix {
 public:
  explicit splitmix(uint64_t seed) : state_(seed) {}
  uint64_t next() { return mix64(state_ += 0x9e3779b97f4a7c15ull); }
  uint64_t below(uint64_t n) { return next() % n; }
  double unit() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

/// What a block holds when the bench filled it: a hash of where it was filled.
uint64_t content_hash(uint64_t tag, uint32_t block) {
  return mix64((tag << 32) | block);
}

/// Runs fn(i) for i in [0, count) on a few threads: filling and checking gigabytes of pinned
/// memory on one core would take longer than the transfers.
template <class Fn>
void parallel_for(size_t count, Fn fn) {
  size_t threads = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, cpu_threads_max);
  threads = std::min(threads, std::max<size_t>(count, 1));
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (size_t i = t; i < count; i += threads)
        fn(i);
    });
  for (std::thread& th : pool)
    th.join();
}

}  // namespace

std::vector<uint32_t> shuffled_runs(uint64_t seed, uint32_t pool, double run_share,
                                    uint32_t run_length_max) {
  splitmix rng(seed);
  double mean_run = (2.0 + run_length_max) / 2;
  double share = std::clamp(run_share, 0.0, 1.0);
  double run_chance = run_length_max < 2 ? 0 : share / (share + (1 - share) * mean_run);
  std::vector<block_run> segments;
  for (uint32_t i = 0; i < pool;) {
    uint32_t len = rng.unit() < run_chance ? 2 + rng.below(run_length_max - 1) : 1;
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

placement place_blocks(uint32_t n, uint32_t pool, const bench_options& o) {
  std::vector<uint32_t> ids = shuffled_runs(o.seed, pool, o.run_share, o.run_length_max);
  placement p;
  for (uint32_t k = 0; k < n; ++k) {
    p.d2h.push_back(block_pair{ids[k], n + k});
    p.h2d.push_back(block_pair{ids[n + k], k});
  }
  uint64_t in_runs = 0;
  for (const std::vector<block_pair>* pairs : {&p.d2h, &p.h2d})
    for (const block_run& r : find_runs(*pairs, run_rule::both_ids))
      in_runs += r.count > 1 ? r.count : 0;
  p.run_share = static_cast<double>(in_runs) / (2.0 * n);
  return p;
}

void fill_host_sources(kv_cache& c, const std::vector<block_pair>& pairs) {
  parallel_for(pairs.size(), [&](size_t i) {
    fill_host_block(c.host_block(pairs[i].host), c.layout(),
                    content_hash(host_tag, pairs[i].host));
  });
}

void poison_host_targets(kv_cache& c, const std::vector<block_pair>& pairs) {
  parallel_for(pairs.size(), [&](size_t i) {
    std::memset(c.host_block(pairs[i].host), poison_byte, c.layout().host_block_bytes());
  });
}

std::optional<verify_mismatch> check_host_targets(kv_cache& c,
                                                  const std::vector<block_pair>& pairs) {
  std::mutex m;
  std::optional<verify_mismatch> first;
  parallel_for(pairs.size(), [&](size_t i) {
    auto bad = check_host_block(c.host_block(pairs[i].host), c.layout(),
                                content_hash(device_tag, pairs[i].device), pairs[i].host);
    std::lock_guard<std::mutex> lock(m);
    if (bad && (!first || bad->block < first->block))
      first = bad;
  });
  return first;
}

void fill_device_sources(kv_cache& c, const std::vector<block_pair>& pairs) {
  std::vector<block_pattern> blocks;
  for (const block_pair& p : pairs)
    blocks.push_back(block_pattern{p.device, content_hash(device_tag, p.device)});
  c.fill_device_blocks(blocks);
}

void poison_device_targets(kv_cache& c, const std::vector<block_pair>& pairs) {
  std::vector<uint32_t> blocks;
  for (const block_pair& p : pairs)
    blocks.push_back(p.device);
  c.poison_device_blocks(blocks, poison_byte);
  c.synchronize();  // an H2D does not wait for the compute stream, where the poison runs
}

std::optional<verify_mismatch> check_device_targets(kv_cache& c,
                                                    const std::vector<block_pair>& pairs) {
  std::vector<block_pattern> blocks;
  for (const block_pair& p : pairs)
    blocks.push_back(block_pattern{p.device, content_hash(host_tag, p.host)});
  return c.check_device_blocks(blocks);
}

}  // namespace kvtier::gpu::bench
