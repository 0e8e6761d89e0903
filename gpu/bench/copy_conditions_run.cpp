// The copy-conditions probe on a device. It drives the backend through the kv_cache interface
// alone, from threads that share one lock as the replay's device shell does (its submissions,
// its compute and its completion callback all take the device's mutex), so what differs between
// the rows is only the condition named.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <ostream>
#include <set>
#include <thread>

#include "gpu/bench/bench_blocks.hpp"
#include "gpu/bench/copy_conditions.hpp"
#include "gpu/bench/transfer_bench.hpp"

namespace kvtier::gpu {

namespace {

using namespace bench;

/// The emulated passes of the compute thread: a lead, then every layer busy this long.
constexpr uint64_t pass_layer_ns = 20'000;
constexpr uint64_t pass_lead_ns = 100'000;
/// The host pool over the largest copy: scattered ids spread over pinned gigabytes, as a
/// replay's host tier has them (1,024 blocks of 8 MiB in the emulation check).
constexpr uint32_t host_pool_factor = 4;
/// Timed copies per cell at least: single slow copies (H2D has some) must not set the median.
constexpr uint32_t repetitions_min = 9;
/// How often a waiter that has no callback asks whether its op is done.
constexpr auto poll_interval = std::chrono::microseconds(20);

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

/// What the replay's completion callback does: take the device's lock, hand the event to another
/// thread (its actor) and return. The op's end is then waited for through that thread.
class completion_queue {
 public:
  explicit completion_queue(std::mutex& cache_lock)
      : cache_lock_(cache_lock), drainer_([this] { drain(); }) {}
  ~completion_queue() {
    {
      std::lock_guard<std::mutex> g(mutex_);
      stop_ = true;
    }
    queued_.notify_all();
    drainer_.join();
  }
  void push(op_id id, int layer) {
    std::lock_guard<std::mutex> device(cache_lock_);
    {
      std::lock_guard<std::mutex> g(mutex_);
      events_.emplace_back(id, layer);
    }
    queued_.notify_one();
  }
  void wait_done(op_id id) {
    std::unique_lock<std::mutex> g(mutex_);
    done_cv_.wait(g, [&] { return done_.count(id) > 0; });
    done_.erase(id);
  }

 private:
  void drain() {
    std::unique_lock<std::mutex> g(mutex_);
    for (;;) {
      queued_.wait(g, [&] { return stop_ || !events_.empty(); });
      if (events_.empty())
        return;
      auto [id, layer] = events_.front();
      events_.pop_front();
      if (layer == -1) {
        done_.insert(id);
        done_cv_.notify_all();
      }
    }
  }

  std::mutex& cache_lock_;
  std::mutex mutex_;
  std::condition_variable queued_, done_cv_;
  std::deque<std::pair<op_id, int>> events_;
  std::set<op_id> done_;
  bool stop_ = false;
  std::thread drainer_;
};

/// A cache and how its ops are waited for: through the completion queue when it has one, by
/// polling under the lock while another thread uses the cache, else by a blocking wait.
struct probe_cache {
  std::mutex lock;
  std::unique_ptr<completion_queue> queue;
  std::unique_ptr<kv_cache> cache;
  std::atomic<bool> shared{false};  // another thread submits too

  /// Returns once op `id` is done where another thread may use the cache meanwhile; else at
  /// once (the caller's wait under the lock then blocks).
  void await(op_id id) {
    if (queue) {
      queue->wait_done(id);
      return;
    }
    for (bool done = !shared; !done;) {
      std::this_thread::sleep_for(poll_interval);
      std::lock_guard<std::mutex> g(lock);
      done = cache->layer_done(id);
    }
  }
  transfer_timing finish(op_id id) {
    await(id);
    std::lock_guard<std::mutex> g(lock);
    cache->wait(id);  // returns at once unless await() did not wait
    transfer_timing t = cache->transfer_time(id);
    cache->release(id);
    return t;
  }
  op_id submit(transfer_direction d, const std::vector<block_pair>& pairs) {
    std::lock_guard<std::mutex> g(lock);
    return d == transfer_direction::h2d ? cache->submit_h2d(pairs) : cache->submit_d2h(pairs);
  }
};

/// Emulated compute passes submitted and waited for in a loop on a thread of its own, for as
/// long as it lives: the replay's scheduler, whose passes run beside the copies.
class compute_load {
 public:
  explicit compute_load(probe_cache& pc) : pc_(pc) {
    pc_.shared = true;
    thread_ = std::thread([this] { run(); });
  }
  ~compute_load() {
    stop_ = true;
    thread_.join();
    pc_.shared = false;
  }

 private:
  void run() {
    const std::vector<uint64_t> layers(pc_.cache->layout().shape.layers, pass_layer_ns);
    while (!stop_) {
      op_id id;
      {
        std::lock_guard<std::mutex> g(pc_.lock);
        id = pc_.cache->submit_compute(layers, 0, pass_lead_ns);
      }
      pc_.await(id);  // shared is set: it waits
      std::lock_guard<std::mutex> g(pc_.lock);
      pc_.cache->release(id);
    }
  }

  probe_cache& pc_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

bool has(copy_condition c, copy_condition part) {
  bool both = c == copy_condition::callbacks_compute
              && (part == copy_condition::callbacks || part == copy_condition::compute_thread);
  return c == part || both || c == copy_condition::replay_like;
}

/// The probe of one block size: two caches of the same shape, one with a completion callback.
class conditions_probe {
 public:
  conditions_probe(const bench_options& o, uint32_t block_size, uint32_t largest,
                   std::ostream* log);
  condition_figure measure(copy_condition c, transfer_direction d, uint32_t blocks);

 private:
  std::vector<block_pair> pairs(copy_condition c, transfer_direction d, uint32_t k) const;
  bool verify(probe_cache& pc, transfer_direction d, const std::vector<block_pair>& p);

  const bench_options& o_;
  uint32_t block_size_;
  uint32_t n_;  // the largest copy; device pool 3n, host pool host_pool_factor * n
  std::ostream* log_;
  probe_cache plain_, with_callback_;
  placement random_, runs_;
};

conditions_probe::conditions_probe(const bench_options& o, uint32_t block_size,
                                   uint32_t largest, std::ostream* log)
    : o_(o), block_size_(block_size), n_(largest), log_(log) {
  kv_cache_config cfg = o.tuning;
  cfg.shape = o.shape;
  cfg.block_size = block_size;
  cfg.device_blocks = 3 * n_;
  cfg.host_blocks = host_pool_factor * n_;
  cfg.calibrate_compute = true;  // the compute thread's layers take what they ask
  cfg.on_complete = nullptr;
  plain_.cache = make_kv_cache(cfg);
  with_callback_.queue = std::make_unique<completion_queue>(with_callback_.lock);
  completion_queue* q = with_callback_.queue.get();
  cfg.on_complete = [q](op_id id, int layer) { q->push(id, layer); };
  with_callback_.cache = make_kv_cache(cfg);
  random_ = place_blocks(n_, 3 * n_, o);
  bench_options in_runs = o;
  in_runs.seed = o.seed + 1;
  in_runs.run_share = 1.0;
  runs_ = place_blocks(n_, 3 * n_, in_runs);
}

std::vector<block_pair> conditions_probe::pairs(copy_condition c, transfer_direction d,
                                                uint32_t k) const {
  bool h2d = d == transfer_direction::h2d;
  const placement& where = has(c, copy_condition::device_runs) ? runs_ : random_;
  const std::vector<block_pair>& all = h2d ? where.h2d : where.d2h;
  std::vector<block_pair> p(all.begin(), all.begin() + k);
  // Host ids as the sweep has them: [0, k) for H2D, [n, n + k) for D2H.
  for (uint32_t i = 0; i < k; ++i)
    p[i].host = h2d ? i : n_ + i;
  if (has(c, copy_condition::scattered_host)) {
    std::vector<uint32_t> ids = scattered_host_ids(o_.seed * 4 + k + (h2d ? 0 : 1), k,
                                                  host_pool_factor * n_);
    for (uint32_t i = 0; i < k; ++i)
      p[i].host = ids[i];
  }
  return p;
}

/// One copy with its sources filled and its targets poisoned, then every target byte checked.
bool conditions_probe::verify(probe_cache& pc, transfer_direction d,
                              const std::vector<block_pair>& p) {
  kv_cache& c = *pc.cache;
  bool h2d = d == transfer_direction::h2d;
  if (h2d) {
    fill_host_sources(c, p);
    poison_device_targets(c, p);
  } else {
    fill_device_sources(c, p);
    poison_host_targets(c, p);
  }
  pc.finish(pc.submit(d, p));
  auto bad = h2d ? check_device_targets(c, p) : check_host_targets(c, p);
  if (bad)
    throw gpu_error(std::string("copy conditions, ") + to_string(d) + ": " + to_string(*bad));
  return true;
}

condition_figure conditions_probe::measure(copy_condition c, transfer_direction d,
                                           uint32_t blocks) {
  probe_cache& pc = has(c, copy_condition::callbacks) ? with_callback_ : plain_;
  std::vector<block_pair> p = pairs(c, d, blocks);
  condition_figure f;
  f.condition = c;
  f.direction = d;
  f.blocks = blocks;
  f.bytes = blocks * pc.cache->layout().host_block_bytes();
  f.verified = o_.verify && verify(pc, d, p);
  std::unique_ptr<compute_load> load;
  if (has(c, copy_condition::compute_thread))
    load = std::make_unique<compute_load>(pc);
  pc.finish(pc.submit(d, p));  // the warm-up, under the condition
  std::vector<double> ns;
  for (uint32_t i = 0; i < std::max(o_.repetitions, repetitions_min); ++i)
    ns.push_back(pc.finish(pc.submit(d, p)).total_ns);
  load.reset();
  f.median_ns = median(ns);
  if (log_ != nullptr)
    *log_ << "block " << block_size_ << ": condition " << to_string(c) << " " << to_string(d)
          << " " << blocks << " blocks " << static_cast<double>(f.bytes) / f.median_ns
          << " GB/s" << std::endl;
  return f;
}

}  // namespace

std::vector<condition_figure> measure_copy_conditions(
  const bench_options& o, uint32_t block_size, const std::vector<uint32_t>& sizes,
  const std::vector<copy_condition>& conditions, std::ostream* progress,
  const std::vector<transfer_direction>& directions) {
  if (sizes.empty())
    return {};
  uint32_t largest = *std::max_element(sizes.begin(), sizes.end());
  if (largest == 0)
    throw gpu_error("copy conditions: a copy needs at least one block");
  conditions_probe probe(o, block_size, largest, progress);
  std::vector<condition_figure> cells;
  // Per size and direction every condition in a row, so that drift of the link between rows
  // stays small against the differences measured.
  for (uint32_t blocks : sizes)
    for (transfer_direction d : directions)
      for (copy_condition c : conditions)
        cells.push_back(probe.measure(c, d, blocks));
  rate_against_baseline(cells);
  return cells;
}

}  // namespace kvtier::gpu
