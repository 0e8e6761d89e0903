// The benchmark runner. It drives the backend through the kv_cache interface alone, as the
// transfer engine does, so what it measures is what kvtier gets.

#include "gpu/transfer_bench.hpp"

#include <algorithm>
#include <cstring>
#include <ctime>
#include <memory>
#include <mutex>
#include <ostream>
#include <thread>

namespace kvtier::gpu {

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

struct placement {
  std::vector<block_pair> d2h;  ///< device blocks -> host blocks [n, 2n)
  std::vector<block_pair> h2d;  ///< host blocks [0, n) -> other device blocks
  double run_share = 0;
};

/// Cuts the device pool into segments (single blocks, or runs of 2..run_length_max blocks in
/// the proportion that puts `run_share` of the blocks in runs), shuffles them, and deals the
/// blocks out in that order: first the D2H sources, then the H2D destinations.
placement place_blocks(uint32_t n, uint32_t pool, const bench_options& o) {
  splitmix rng(o.seed);
  double mean_run = (2.0 + o.run_length_max) / 2;
  double share = std::clamp(o.run_share, 0.0, 1.0);
  double run_chance = o.run_length_max < 2 ? 0 : share / (share + (1 - share) * mean_run);
  std::vector<block_run> segments;
  for (uint32_t i = 0; i < pool;) {
    uint32_t len = rng.unit() < run_chance ? 2 + rng.below(o.run_length_max - 1) : 1;
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

void fill_host_sources(kv_cache& c, const std::vector<block_pair>& pairs) {
  parallel_for(pairs.size(), [&](size_t i) {
    fill_host_block(c.host_block(pairs[i].host), c.layout().shape,
                    content_hash(host_tag, pairs[i].host));
  });
}

void poison_host_targets(kv_cache& c, const std::vector<block_pair>& pairs) {
  parallel_for(pairs.size(), [&](size_t i) {
    std::memset(c.host_block(pairs[i].host), poison_byte, c.layout().shape.host_block_bytes());
  });
}

std::optional<verify_mismatch> check_host_targets(kv_cache& c,
                                                  const std::vector<block_pair>& pairs) {
  std::mutex m;
  std::optional<verify_mismatch> first;
  parallel_for(pairs.size(), [&](size_t i) {
    auto bad = check_host_block(c.host_block(pairs[i].host), c.layout().shape,
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

void require_clean(const std::optional<verify_mismatch>& bad, const std::string& what) {
  if (bad)
    throw gpu_error("transfer bench, " + what + ": " + to_string(*bad));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

op_id submit(kv_cache& c, transfer_direction d, const std::vector<block_pair>& pairs,
             transfer_method m) {
  return d == transfer_direction::h2d ? c.submit_h2d(pairs, m) : c.submit_d2h(pairs, m);
}

/// Waits for op `id`, takes its timing and releases it.
transfer_timing finish(kv_cache& c, op_id id) {
  c.wait(id);
  transfer_timing t = c.transfer_time(id);
  c.release(id);
  return t;
}

/// Device time from the earlier start to the later end of two ops, which are then released.
double span_ns(kv_cache& c, op_id a, op_id b) {
  c.wait(a);
  c.wait(b);
  double offset = c.start_offset_ns(a, b);
  double end = std::max(finish(c, a).total_ns, offset + finish(c, b).total_ns);
  return end - std::min(0.0, offset);
}

std::string gbps_text(double gbps) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GB/s", gbps);
  return buf;
}

/// One block size's run: its cache, its placement, and the measurements in order.
class size_run {
 public:
  size_run(const bench_options& o, uint32_t block_size, std::ostream* log);
  block_size_figures measure();

 private:
  void log(const std::string& line) {
    if (log_ != nullptr)
      *log_ << "block " << fig_.block_size << ": " << line << std::endl;
  }
  double bulk(transfer_direction d);
  double bulk_duplex();
  method_figures method(transfer_method m, transfer_direction d);
  duplex_figures duplex(transfer_method m);
  link_fit fit(transfer_method m, transfer_direction d, double large_ns);
  const std::vector<block_pair>& pairs(transfer_direction d) const {
    return d == transfer_direction::h2d ? place_.h2d : place_.d2h;
  }

  const bench_options& o_;
  std::ostream* log_;
  block_size_figures fig_;
  std::unique_ptr<kv_cache> cache_;
  placement place_;
};

size_run::size_run(const bench_options& o, uint32_t block_size, std::ostream* log)
    : o_(o), log_(log) {
  kv_cache_config cfg = o.tuning;
  cfg.shape = o.shape;
  cfg.shape.block_size = block_size;
  uint64_t block_bytes = cfg.shape.host_block_bytes();
  uint32_t n = static_cast<uint32_t>(std::max<uint64_t>(1, o.transfer_bytes / block_bytes));
  cfg.device_blocks = 3 * n;
  cfg.host_blocks = 2 * n;
  cfg.calibrate_compute = false;
  cfg.on_complete = nullptr;
  cache_ = make_kv_cache(cfg);
  place_ = place_blocks(n, cfg.device_blocks, o);
  fig_.block_size = block_size;
  fig_.blocks = n;
  fig_.bytes = n * block_bytes;
  fig_.run_share = place_.run_share;
}

double size_run::bulk(transfer_direction d) {
  bool h2d = d == transfer_direction::h2d;
  // Device [0, B) -> host [B, 2B) and host [0, B) -> device [B, 2B): what bulk_duplex runs.
  auto once = [&] {
    return finish(*cache_, cache_->submit_bulk(d, fig_.bytes, h2d ? fig_.bytes : 0,
                                               h2d ? 0 : fig_.bytes)).total_ns;
  };
  once();
  std::vector<double> ns;
  for (uint32_t i = 0; i < o_.repetitions; ++i)
    ns.push_back(once());
  double gbps = fig_.bytes / median(ns);
  log(std::string("bulk ") + to_string(d) + " " + gbps_text(gbps));
  return gbps;
}

double size_run::bulk_duplex() {
  auto once = [&] {
    op_id a = cache_->submit_bulk(transfer_direction::d2h, fig_.bytes, 0, fig_.bytes);
    op_id b = cache_->submit_bulk(transfer_direction::h2d, fig_.bytes, fig_.bytes, 0);
    return span_ns(*cache_, a, b);
  };
  once();
  std::vector<double> ns;
  for (uint32_t i = 0; i < o_.repetitions; ++i)
    ns.push_back(once());
  double gbps = 2.0 * fig_.bytes / median(ns);
  log("bulk duplex " + gbps_text(gbps));
  return gbps;
}

method_figures size_run::method(transfer_method m, transfer_direction d) {
  kv_cache& c = *cache_;
  const std::vector<block_pair>& p = pairs(d);
  bool h2d = d == transfer_direction::h2d;
  if (o_.verify) {
    h2d ? poison_device_targets(c, p) : poison_host_targets(c, p);
    finish(c, submit(c, d, p, m));
    std::string what = std::string(to_string(m)) + " " + to_string(d);
    require_clean(h2d ? check_device_targets(c, p) : check_host_targets(c, p), what);
  } else {
    finish(c, submit(c, d, p, m));
  }
  std::vector<double> ns;
  for (uint32_t i = 0; i < o_.repetitions; ++i)
    ns.push_back(finish(c, submit(c, d, p, m)).total_ns);
  method_figures f;
  f.method = m;
  f.direction = d;
  f.median_ns = median(ns);
  f.gbps = fig_.bytes / f.median_ns;
  f.of_bulk = f.gbps / (h2d ? fig_.bulk_h2d_gbps : fig_.bulk_d2h_gbps);
  f.verified = o_.verify;
  f.fit = fit(m, d, f.median_ns);
  log(std::string(to_string(m)) + " " + to_string(d) + " " + gbps_text(f.gbps));
  return f;
}

duplex_figures size_run::duplex(transfer_method m) {
  kv_cache& c = *cache_;
  auto once = [&] {
    op_id a = c.submit_d2h(place_.d2h, m);
    op_id b = c.submit_h2d(place_.h2d, m);
    return span_ns(c, a, b);
  };
  if (o_.verify) {
    poison_host_targets(c, place_.d2h);
    poison_device_targets(c, place_.h2d);
    once();
    std::string what = std::string(to_string(m)) + " duplex";
    require_clean(check_host_targets(c, place_.d2h), what + " d2h");
    require_clean(check_device_targets(c, place_.h2d), what + " h2d");
  } else {
    once();
  }
  std::vector<double> ns;
  for (uint32_t i = 0; i < o_.repetitions; ++i)
    ns.push_back(once());
  duplex_figures f;
  f.method = m;
  f.median_ns = median(ns);
  f.gbps = 2.0 * fig_.bytes / f.median_ns;
  f.of_bulk = f.gbps / fig_.bulk_duplex_gbps;
  f.verified = o_.verify;
  log(std::string(to_string(m)) + " duplex " + gbps_text(f.gbps));
  return f;
}

/// The fit of method `m` from a small transfer (the first small_blocks pairs) and the full one
/// (`large_ns`); for H2D also the cost of one layer step, from the gaps between layer events.
link_fit size_run::fit(transfer_method m, transfer_direction d, double large_ns) {
  const std::vector<block_pair>& all = pairs(d);
  std::vector<block_pair> small(all.begin(), all.begin() + std::min<size_t>(o_.small_blocks,
                                                                            all.size() - 1));
  uint64_t small_bytes = small.size() * cache_->layout().shape.host_block_bytes();
  finish(*cache_, submit(*cache_, d, small, m));
  std::vector<double> ns, layer_gaps;
  for (uint32_t i = 0; i < o_.repetitions; ++i) {
    transfer_timing t = finish(*cache_, submit(*cache_, d, small, m));
    ns.push_back(t.total_ns);
    std::vector<double> gaps;
    for (size_t l = 1; l < t.layer_done_ns.size(); ++l)
      gaps.push_back(t.layer_done_ns[l] - t.layer_done_ns[l - 1]);
    if (!gaps.empty())
      layer_gaps.push_back(median(gaps));
  }
  link_fit f = fit_link(small_bytes, median(ns), fig_.bytes, large_ns);
  f.method = m;
  if (!layer_gaps.empty()) {
    double layer_bytes = static_cast<double>(small_bytes) / cache_->layout().shape.layers;
    f.layer_latency_us = std::max(0.0, median(layer_gaps) - layer_bytes / f.bandwidth_gbps) / 1e3;
  }
  return f;
}

block_size_figures size_run::measure() {
  // The bulk copies overwrite whatever lies in their ranges: run them before the patterns.
  fig_.bulk_h2d_gbps = bulk(transfer_direction::h2d);
  fig_.bulk_d2h_gbps = bulk(transfer_direction::d2h);
  fig_.bulk_duplex_gbps = bulk_duplex();
  if (o_.verify) {
    fill_host_sources(*cache_, place_.h2d);
    fill_device_sources(*cache_, place_.d2h);
  }
  std::vector<transfer_method> methods = o_.methods;
  for (transfer_direction d : {transfer_direction::h2d, transfer_direction::d2h})
    if (std::find(methods.begin(), methods.end(), default_method(d)) == methods.end())
      methods.push_back(default_method(d));
  for (transfer_method m : methods)
    for (transfer_direction d : {transfer_direction::h2d, transfer_direction::d2h})
      fig_.methods.push_back(method(m, d));
  for (transfer_method m : methods)
    if (m != transfer_method::per_chunk)
      fig_.duplex.push_back(duplex(m));
  for (const method_figures& f : fig_.methods) {
    if (f.method == default_method(f.direction))
      (f.direction == transfer_direction::h2d ? fig_.h2d_fit : fig_.d2h_fit) = f.fit;
  }
  return fig_;
}

std::string iso_utc_now() {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

}  // namespace

bench_report run_transfer_bench(const bench_options& o, std::ostream* progress) {
  if (o.block_sizes.empty() || o.repetitions == 0 || o.transfer_bytes == 0)
    throw gpu_error("transfer bench: needs block sizes, repetitions and transfer bytes");
  bench_report r;
  r.device = query_device(o.tuning.device_ordinal);
  if (!r.device.available)
    throw gpu_error("transfer bench: " + describe(r.device));
  r.measured_at = iso_utc_now();
  r.shape = o.shape;
  r.transfer_bytes = o.transfer_bytes;
  r.repetitions = o.repetitions;
  r.verify = o.verify;
  for (uint32_t block_size : o.block_sizes)
    r.sizes.push_back(size_run(o, block_size, progress).measure());
  return r;
}

}  // namespace kvtier::gpu
