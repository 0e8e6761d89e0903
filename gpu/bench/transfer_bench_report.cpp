// The benchmark's outputs: the latency fit, the table, the JSON forms and the target check.
// Pure C++ over bench_report, so all of it is tested without a device.

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "gpu/bench/transfer_bench.hpp"

namespace kvtier::gpu {

namespace {

constexpr double method_target = 0.95;
constexpr double duplex_target = 0.90;

double speedup_target(uint32_t block_size) {
  return block_size <= 16 ? 4.0 : 2.0;
}

/// The fastest verified method in direction `d`, or nullptr.
const method_figures* best_method(const block_size_figures& s, transfer_direction d) {
  const method_figures* best = nullptr;
  for (const method_figures& m : s.methods)
    if (m.direction == d && (best == nullptr || m.gbps > best->gbps))
      best = &m;
  return best;
}

const method_figures* figures_of(const block_size_figures& s, transfer_method method,
                                 transfer_direction d) {
  for (const method_figures& m : s.methods)
    if (m.method == method && m.direction == d)
      return &m;
  return nullptr;
}

const duplex_figures* best_duplex(const block_size_figures& s) {
  const duplex_figures* best = nullptr;
  for (const duplex_figures& x : s.duplex)
    if (best == nullptr || x.gbps > best->gbps)
      best = &x;
  return best;
}

const block_size_figures& size_of(const bench_report& report, uint32_t block_size) {
  for (const block_size_figures& s : report.sizes)
    if (s.block_size == block_size)
      return s;
  throw gpu_error("the transfer bench did not measure " + std::to_string(block_size)
                  + "-token blocks");
}

std::string format(const char* fmt, double a, double b = 0, double c = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, fmt, a, b, c);
  return buf;
}

/// The model's KV dimensions; the calibration file adds the block size it describes (the
/// bench's report lists its block sizes apart).
nlohmann::json shape_json(const model_shape& s) {
  return {{"layers", s.layers},
          {"kv_heads", s.kv_heads},
          {"head_dim", s.head_dim},
          {"dtype_bytes", s.dtype_bytes}};
}

/// One sweep: each size back to back, beside compute, on fresh host blocks, under the replay's
/// conditions if timed (the fit goes through the last of these measured) and after an idle gap
/// if timed; the fit's value and residual.
void sweep_rows(const link_sweep& w, std::string& out) {
  bool idle = !w.points.empty() && w.points.front().idle_median_ns > 0;
  bool replay = !w.points.empty() && w.points.front().replay_like_ns > 0;
  out += std::string("  sweep ") + (w.direction == transfer_direction::h2d ? "H2D" : "D2H")
         + " " + to_string(w.fit.method) + " (ms, GB/s):\n"
         + "   blocks      MiB   back to back   beside compute     fresh host      fit  residual"
         + (idle ? "   after idle" : "") + (replay ? "    replay-like" : "") + "\n";
  for (const sweep_point& p : w.points) {
    char row[200];
    auto rate = [&](double ns) { return ns > 0 ? p.bytes / ns : 0.0; };
    std::snprintf(row, sizeof row,
                  "  %7u %8.1f %8.3f %5.1f %10.3f %5.1f %9.3f %5.1f %8.3f %+8.1f%%%s", p.blocks,
                  static_cast<double>(p.bytes) / (1 << 20), p.median_ns / 1e6,
                  rate(p.median_ns), p.beside_compute_ns / 1e6, rate(p.beside_compute_ns),
                  p.fresh_host_ns / 1e6, rate(p.fresh_host_ns), p.fitted_ns / 1e6,
                  100 * p.residual(), p.used ? "" : " (left out)");
    out += row;
    if (idle)
      out += format(" %8.3f %5.1f", p.idle_median_ns / 1e6, p.bytes / p.idle_median_ns);
    if (replay)
      out += format(" %8.3f %5.1f", p.replay_like_ns / 1e6, p.bytes / p.replay_like_ns);
    out += "\n";
  }
  out += format("  sweep fit: %.1f GB/s, fixed %.1f us; largest residual %.1f%%",
                w.fit.bandwidth_gbps, w.fit.latency_us, 100 * w.max_residual)
         + (w.rejected.empty() ? std::string("\n") : "; REFUSED: " + w.rejected + "\n");
}

void table_rows(const block_size_figures& s, std::string& out) {
  out += "  method       H2D GB/s  of bulk  fixed us   D2H GB/s  of bulk  fixed us  verified\n";
  out += format("  bulk copy    %8.1f   100.0%%         -   %8.1f   100.0%%         -  -\n",
                s.bulk_h2d_gbps, s.bulk_d2h_gbps);
  std::vector<transfer_method> seen;
  for (const method_figures& m : s.methods) {
    if (std::find(seen.begin(), seen.end(), m.method) != seen.end())
      continue;
    seen.push_back(m.method);
    const method_figures* h = figures_of(s, m.method, transfer_direction::h2d);
    const method_figures* d = figures_of(s, m.method, transfer_direction::d2h);
    char line[160];
    std::snprintf(line, sizeof line,
                  "  %-11s  %8.1f  %6.1f%%  %8.1f   %8.1f  %6.1f%%  %8.1f  %s\n",
                  to_string(m.method), h ? h->gbps : 0.0, h ? 100 * h->of_bulk : 0.0,
                  h ? h->fit.latency_us : 0.0, d ? d->gbps : 0.0, d ? 100 * d->of_bulk : 0.0,
                  d ? d->fit.latency_us : 0.0,
                  (h == nullptr || h->verified) && (d == nullptr || d->verified) ? "yes" : "no");
    out += line;
  }
  out += format("  duplex: bulk D2H + H2D together %.1f GB/s\n", s.bulk_duplex_gbps);
  for (const duplex_figures& x : s.duplex) {
    char line[160];
    std::snprintf(line, sizeof line, "  duplex: %-9s both ways %6.1f GB/s  %5.1f%% of bulk  %s\n",
                  to_string(x.method), x.gbps, 100 * x.of_bulk,
                  x.verified ? "verified" : "unverified");
    out += line;
  }
  for (const link_sweep& w : s.sweeps)
    sweep_rows(w, out);
  for (const link_fit* f : {&s.h2d_fit, &s.d2h_fit}) {
    bool h2d = f == &s.h2d_fit;
    out += std::string("  calibration ") + (h2d ? "H2D " : "D2H ") + to_string(f->method) + ": "
           + format("%.1f GB/s, fixed %.1f us per transfer", f->bandwidth_gbps, f->latency_us)
           + (h2d ? format(", %.2f us per layer", f->layer_latency_us) : "") + "\n";
  }  if (!s.conditions.empty())
    out += format_conditions_table(s.conditions, s.block_size);
}

}  // namespace

link_fit fit_link(uint64_t small_bytes, double small_ns, uint64_t large_bytes, double large_ns) {
  link_fit f;
  double bytes = static_cast<double>(large_bytes) - static_cast<double>(small_bytes);
  double ns = large_ns - small_ns;
  if (bytes <= 0 || ns <= 0)
    throw gpu_error("cannot fit latency and bandwidth: the large transfer ("
                    + std::to_string(large_bytes) + " bytes, " + std::to_string(large_ns)
                    + " ns) is not larger and slower than the small one ("
                    + std::to_string(small_bytes) + " bytes, " + std::to_string(small_ns)
                    + " ns)");
  f.bandwidth_gbps = bytes / ns;  // bytes per ns == GB/s
  f.latency_us = std::max(0.0, small_ns - small_bytes / f.bandwidth_gbps) / 1e3;
  return f;
}

std::vector<std::string> missed_targets(const bench_report& report) {
  std::vector<std::string> misses;
  for (const block_size_figures& s : report.sizes) {
    std::string at = " at " + std::to_string(s.block_size) + "-token blocks";
    for (transfer_direction d : {transfer_direction::h2d, transfer_direction::d2h}) {
      const method_figures* best = best_method(s, d);
      const method_figures* base = figures_of(s, transfer_method::per_chunk, d);
      std::string dir = d == transfer_direction::h2d ? "H2D" : "D2H";
      if (best == nullptr || best->of_bulk < method_target)
        misses.push_back(dir + ": best method below 95% of bulk" + at);
      if (best != nullptr && !best->verified)
        misses.push_back(dir + ": best method not verified" + at);
      double want = speedup_target(s.block_size);
      if (best == nullptr || base == nullptr || best->gbps < want * base->gbps)
        misses.push_back(dir + ": best method not " + format("%.0fx", want) + " per_chunk" + at);
    }
    const duplex_figures* dx = best_duplex(s);
    if (dx == nullptr || dx->of_bulk < duplex_target)
      misses.push_back("duplex: best pair below 90% of bulk duplex" + at);
  }
  return misses;
}

std::string format_bench_table(const bench_report& r) {
  const model_shape& sh = r.shape;
  std::string out = "transfer bench: " + describe(r.device) + "\n  measured " + r.measured_at
                    + "; " + std::to_string(sh.layers) + " layers x " + std::to_string(sh.kv_heads)
                    + " kv heads x " + std::to_string(sh.head_dim) + " head dim, "
                    + std::to_string(sh.dtype_bytes) + "-byte elements; "
                    + format("%.2f GiB", static_cast<double>(r.transfer_bytes) / (1ull << 30))
                    + " per transfer; median of " + std::to_string(r.repetitions)
                    + (r.verify ? ", warm-up verified" : ", unverified") + "\n";
  for (const block_size_figures& s : r.sizes) {
    out += "\nblock " + std::to_string(s.block_size) + " tokens: " + std::to_string(s.blocks)
           + " blocks per transfer"
           + format(" (%.2f GiB, %.0f%% in contiguous runs)\n",
                    static_cast<double>(s.bytes) / (1ull << 30), 100 * s.run_share);
    table_rows(s, out);
  }
  std::vector<std::string> misses = missed_targets(r);
  out += misses.empty() ? "\ntargets: all met\n" : "\ntargets missed:\n";
  for (const std::string& m : misses)
    out += "  " + m + "\n";
  return out;
}

namespace {

nlohmann::json sweep_json(const link_sweep& w) {
  nlohmann::json points = nlohmann::json::array();
  for (const sweep_point& p : w.points)
    points.push_back({{"blocks", p.blocks},         {"bytes", p.bytes},
                      {"median_ms", p.median_ns / 1e6}, {"idle_median_ms", p.idle_median_ns / 1e6},
                      {"beside_compute_ms", p.beside_compute_ns / 1e6},
                      {"fresh_host_ms", p.fresh_host_ns / 1e6},
                      {"replay_like_ms", p.replay_like_ns / 1e6},
                      {"fitted_ms", p.fitted_ns / 1e6}, {"residual", p.residual()},
                      {"used", p.used}});
  return {{"direction", to_string(w.direction)}, {"method", to_string(w.fit.method)},
          {"bandwidth_gbps", w.fit.bandwidth_gbps}, {"latency_us", w.fit.latency_us},
          {"max_residual", w.max_residual}, {"rejected", w.rejected}, {"points", points}};
}

}  // namespace

std::string calibration_refusal(const bench_report& r, uint32_t block_size) {
  for (const link_sweep& w : size_of(r, block_size).sweeps)
    if (!w.rejected.empty())
      return std::string("the ") + (w.direction == transfer_direction::h2d ? "H2D" : "D2H")
             + " sweep at " + std::to_string(block_size) + "-token blocks: " + w.rejected;
  return "";
}

nlohmann::json bench_to_json(const bench_report& r) {
  nlohmann::json sizes = nlohmann::json::array();
  for (const block_size_figures& s : r.sizes) {
    nlohmann::json methods = nlohmann::json::array();
    for (const method_figures& m : s.methods)
      methods.push_back({{"method", to_string(m.method)},
                         {"direction", to_string(m.direction)},
                         {"median_ms", m.median_ns / 1e6},
                         {"gbps", m.gbps},
                         {"of_bulk", m.of_bulk},
                         {"verified", m.verified},
                         {"fit", {{"bandwidth_gbps", m.fit.bandwidth_gbps},
                                  {"latency_us", m.fit.latency_us},
                                  {"layer_latency_us", m.fit.layer_latency_us}}}});
    nlohmann::json duplex = nlohmann::json::array();
    for (const duplex_figures& x : s.duplex)
      duplex.push_back({{"method", to_string(x.method)},
                        {"median_ms", x.median_ns / 1e6},
                        {"gbps", x.gbps},
                        {"of_bulk", x.of_bulk},
                        {"verified", x.verified}});
    nlohmann::json sweeps = nlohmann::json::array();
    for (const link_sweep& w : s.sweeps)
      sweeps.push_back(sweep_json(w));
    sizes.push_back({{"block_size", s.block_size},
                     {"blocks", s.blocks},
                     {"bytes", s.bytes},
                     {"run_share", s.run_share},
                     {"bulk", {{"h2d_gbps", s.bulk_h2d_gbps},
                               {"d2h_gbps", s.bulk_d2h_gbps},
                               {"duplex_gbps", s.bulk_duplex_gbps}}},
                     {"methods", methods},
                     {"duplex", duplex},
                     {"sweeps", sweeps},
                     {"calibration", calibration_json(r, s.block_size)}});
    if (!s.conditions.empty())
      sizes.back()["conditions"] = conditions_json(s.conditions);
  }
  std::vector<std::string> misses = missed_targets(r);
  return {{"schema", "kvtier.transfer_bench/1"},
          {"device", describe(r.device)},
          {"measured_at", r.measured_at},
          {"shape", shape_json(r.shape)},
          {"transfer_bytes", r.transfer_bytes},
          {"repetitions", r.repetitions},
          {"verify", r.verify},
          {"block_sizes", sizes},
          {"targets", {{"met", misses.empty()}, {"missed", misses}}}};
}

nlohmann::json calibration_json(const bench_report& r, uint32_t block_size) {
  const block_size_figures& s = size_of(r, block_size);
  nlohmann::json shape = shape_json(r.shape);
  shape["block_size"] = block_size;
  double duplex = 0;
  for (const duplex_figures& x : s.duplex)
    if (x.method == s.h2d_fit.method && x.method == s.d2h_fit.method)
      duplex = x.gbps;
  nlohmann::json out = {{"schema", "kvtier.calibration/1"},
          {"device", r.device.name},
          {"measured_at", r.measured_at},
          {"shape", shape},
          {"block_size", block_size},
          {"h2d", {{"method", to_string(s.h2d_fit.method)},
                   {"bandwidth_gbps", s.h2d_fit.bandwidth_gbps},
                   {"latency_us", s.h2d_fit.latency_us},
                   {"layer_latency_us", s.h2d_fit.layer_latency_us}}},
          {"d2h", {{"method", to_string(s.d2h_fit.method)},
                   {"bandwidth_gbps", s.d2h_fit.bandwidth_gbps},
                   {"latency_us", s.d2h_fit.latency_us}}},
          {"duplex_gbps", duplex}};
  // The stall a step after a swap-in meets per layer (links.h2d_layer_wait_us), when measured.
  if (r.compute.layer_wait_ns > 0)
    out["compute"] = {{"layer_wait_us", r.compute.layer_wait_ns / 1e3}};
  return out;
}

void write_calibration_file(const std::string& path, const bench_report& report,
                            uint32_t block_size) {
  std::ofstream out(path);
  out << calibration_json(report, block_size).dump(2) << "\n";
  if (!out)
    throw gpu_error("cannot write the calibration file " + path);
}

}  // namespace kvtier::gpu
