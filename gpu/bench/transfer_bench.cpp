// The benchmark runner. It drives the backend through the kv_cache interface alone, as the
// transfer engine does, so what it measures is what kvtier gets.

#include "gpu/bench/transfer_bench.hpp"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <memory>
#include <ostream>
#include <thread>

#include "gpu/bench/bench_blocks.hpp"

namespace kvtier::gpu {

namespace {

using namespace bench;

/// Timings of the sweep's fresh-host column, each on host blocks of its own.
constexpr uint32_t fresh_repetitions = 3;

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
  link_sweep sweep(transfer_direction d);
  enum class timing { back_to_back, after_idle, beside_compute, fresh_host };
  double time_copies(transfer_direction d, const std::vector<block_pair>& pairs, timing how,
                     double cover_ns = 0);
  std::vector<op_id> load_compute(double cover_ns);
  const std::vector<block_pair>& pairs(transfer_direction d) const {
    return d == transfer_direction::h2d ? place_.h2d : place_.d2h;
  }

  const bench_options& o_;
  uint32_t fresh_first_ = 0;  // the next host block no copy has touched
  std::ostream* log_;
  block_size_figures fig_;
  std::unique_ptr<kv_cache> cache_;
  placement place_;
};

size_run::size_run(const bench_options& o, uint32_t block_size, std::ostream* log)
    : o_(o), log_(log) {
  kv_cache_config cfg = o.tuning;
  cfg.shape = o.shape;
  cfg.block_size = block_size;
  uint64_t block_bytes = kv_layout{cfg.shape, block_size}.host_block_bytes();
  uint32_t n = static_cast<uint32_t>(std::max<uint64_t>(1, o.transfer_bytes / block_bytes));
  cfg.device_blocks = 3 * n;
  // Past the 2n blocks of the placement, host blocks that each sweep copy of the fresh-host
  // column uses once, as a replay's backups write (and its swap-ins read) host blocks the GPU
  // has not touched since long before.
  uint32_t fresh = 0;
  for (uint32_t k : sweep_sizes(n))
    fresh += 2 * k * fresh_repetitions;  // both directions
  cfg.host_blocks = 2 * n + fresh;
  fresh_first_ = 2 * n;
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
  uint64_t small_bytes = small.size() * cache_->layout().host_block_bytes();
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

/// Busy passes on the compute stream for about `cover_ns`, submitted after a copy so that they
/// run beside it, as the steps after a backup's producer (or a swap-in's own step) do.
std::vector<op_id> size_run::load_compute(double cover_ns) {
  constexpr uint64_t layer_ns = 10'000;
  const std::vector<uint64_t> pass(cache_->layout().shape.layers, layer_ns);
  double pass_ns = static_cast<double>(layer_ns) * pass.size();
  std::vector<op_id> ids;
  for (double covered = 0; covered < cover_ns; covered += pass_ns)
    ids.push_back(cache_->submit_compute(pass));
  return ids;
}

/// The median of the repetitions of one transfer of `p` by the default method: back to back,
/// each after bench_options::idle_gap_ms with nothing in flight, or each beside compute passes
/// covering `cover_ns`.
double size_run::time_copies(transfer_direction d, const std::vector<block_pair>& p, timing how,
                             double cover_ns) {
  std::vector<double> ns;
  uint32_t reps = how == timing::fresh_host ? fresh_repetitions : o_.repetitions;
  for (uint32_t i = 0; i < reps; ++i) {
    if (how == timing::after_idle)
      std::this_thread::sleep_for(std::chrono::milliseconds(o_.idle_gap_ms));
    std::vector<block_pair> fresh = p;
    if (how == timing::fresh_host)
      for (block_pair& f : fresh)
        f.host = fresh_first_++;
    op_id copy = submit(*cache_, d, how == timing::fresh_host ? fresh : p, default_method(d));
    std::vector<op_id> load;
    if (how == timing::beside_compute)
      load = load_compute(cover_ns);
    ns.push_back(finish(*cache_, copy).total_ns);
    for (op_id c : load) {
      cache_->wait(c);
      cache_->release(c);
    }
  }
  return median(ns);
}

/// The calibration sweep: the first k pairs of the placement for k = 1, 2, 4, ... and all, each
/// after a warm-up copy of its own.
link_sweep size_run::sweep(transfer_direction d) {
  const std::vector<block_pair>& all = pairs(d);
  uint64_t block_bytes = cache_->layout().host_block_bytes();
  std::vector<sweep_point> points;
  for (uint32_t k : sweep_sizes(static_cast<uint32_t>(all.size()))) {
    std::vector<block_pair> some(all.begin(), all.begin() + k);
    finish(*cache_, submit(*cache_, d, some, default_method(d)));
    sweep_point p;
    p.blocks = k;
    p.bytes = k * block_bytes;
    p.median_ns = time_copies(d, some, timing::back_to_back);
    if (o_.idle_gap_ms > 0)
      p.idle_median_ns = time_copies(d, some, timing::after_idle);
    p.beside_compute_ns = time_copies(d, some, timing::beside_compute, 1.5 * p.median_ns);
    p.fresh_host_ns = time_copies(d, some, timing::fresh_host);
    points.push_back(p);
  }
  link_sweep w = fit_sweep(d, default_method(d), points, cache_->layout().shape.layers);
  log(std::string("sweep ") + to_string(d) + " " + gbps_text(w.fit.bandwidth_gbps)
      + (w.rejected.empty() ? "" : " REFUSED: " + w.rejected));
  return w;
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
  // The calibration comes from the sweep: copies of every size a replay makes.
  for (transfer_direction d : {transfer_direction::h2d, transfer_direction::d2h}) {
    fig_.sweeps.push_back(sweep(d));
    (d == transfer_direction::h2d ? fig_.h2d_fit : fig_.d2h_fit) = fig_.sweeps.back().fit;
  }
  return fig_;
}

/// Times the D2H sweep's sizes again under the replay's conditions and refits D2H through
/// them: a replay's backups run 5-7% slower than the bench's own copies, as copies under those
/// conditions do. H2D stays the bench's: a replay's swap-ins run within 1-2% of it (a step waits
/// for its swap-in, so little compute and few completions run beside one), while the probe's
/// H2D under the same conditions runs 2-6% slower with fixed costs no line fits (docs/gpu.md
/// "Copy rates under replay conditions").
void sweep_under_replay_conditions(const bench_options& o, block_size_figures& s,
                                   std::ostream* log) {
  if (s.sweeps.empty())
    return;
  std::vector<uint32_t> sizes;
  for (const sweep_point& p : s.sweeps.front().points)
    sizes.push_back(p.blocks);
  std::vector<condition_figure> cells = measure_copy_conditions(
    o, s.block_size, sizes, {copy_condition::replay_like}, log, {transfer_direction::d2h});
  refit_d2h_through(cells, s, o.shape.layers);
  if (log != nullptr)
    *log << "block " << s.block_size << ": sweep d2h under replay conditions "
         << gbps_text(s.d2h_fit.bandwidth_gbps) << std::endl;
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
  for (uint32_t block_size : o.block_sizes) {
    r.sizes.push_back(size_run(o, block_size, progress).measure());
    // On caches of their own, once the size_run's memory is free again.
    if (o.sweep == sweep_conditions::replay_like)
      sweep_under_replay_conditions(o, r.sizes.back(), progress);
    r.sizes.back().conditions = measure_copy_conditions(o, block_size, o.condition_sizes,
                                                        all_copy_conditions(), progress);
  }
  return r;
}

}  // namespace kvtier::gpu
