// Fits the links' calibration to a real replay's copies with the calibration sweep's fit
// (gpu/bench/link_sweep.cpp); see gpu/bench/replay_copy_fit.hpp and docs/gpu.md.

#include "gpu/bench/replay_copy_fit.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

namespace kvtier::gpu {

namespace {

const char* name_of(transfer_direction d) {
  return d == transfer_direction::h2d ? "H2D" : "D2H";
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

link_sweep fit_direction(const std::vector<measured_copy>& copies, transfer_direction d,
                         uint64_t block_bytes, uint32_t layers, std::vector<uint32_t>& counts) {
  std::vector<sweep_point> points = copy_points(copies, d, block_bytes, &counts);
  if (points.empty()) {
    link_sweep none;
    none.direction = d;
    none.rejected = "the run made no copies";
    return none;
  }
  size_t sizes = points.size();
  return fit_sweep(d, default_method(d), std::move(points), layers,
                   replay_left_out_max(sizes));
}

void rows(const link_sweep& w, const std::vector<uint32_t>& counts, std::string& out) {
  char line[200];
  out += std::string("replay copies ") + name_of(w.direction)
         + ":\n   blocks   copies   median_ms      fit_ms  residual\n";
  for (size_t i = 0; i < w.points.size(); ++i) {
    const sweep_point& p = w.points[i];
    std::snprintf(line, sizeof line, "  %7u %8u %11.4f %11.4f %+8.1f%%%s\n", p.blocks,
                  i < counts.size() ? counts[i] : 0, p.median_ns / 1e6, p.fitted_ns / 1e6,
                  100 * p.residual(), p.used ? "" : " (left out)");
    out += line;
  }
  std::snprintf(line, sizeof line, "  fit: %.2f GB/s, fixed %.1f us; largest residual %.1f%%",
                w.fit.bandwidth_gbps, w.fit.latency_us, 100 * w.max_residual);
  out += line;
  out += w.rejected.empty() ? std::string("\n") : "; REFUSED: " + w.rejected + "\n";
}

}  // namespace

std::vector<sweep_point> copy_points(const std::vector<measured_copy>& copies,
                                     transfer_direction d, uint64_t block_bytes,
                                     std::vector<uint32_t>* counts) {
  std::map<uint32_t, std::vector<double>> by_blocks;
  for (const measured_copy& c : copies)
    if (c.direction == d && c.blocks > 0 && c.duration_ns > 0)
      by_blocks[c.blocks].push_back(c.duration_ns);
  std::vector<sweep_point> points;
  if (counts)
    counts->clear();
  for (const auto& [blocks, ns] : by_blocks) {
    sweep_point p;
    p.blocks = blocks;
    p.bytes = uint64_t{blocks} * block_bytes;
    p.median_ns = median_of(ns);
    points.push_back(p);
    if (counts)
      counts->push_back(static_cast<uint32_t>(ns.size()));
  }
  return points;
}

size_t replay_left_out_max(size_t sizes) {
  return std::max<size_t>(1, sizes / 10);
}

replay_copy_fit fit_replay_copies(const std::vector<measured_copy>& copies, uint64_t block_bytes,
                                  uint32_t layers) {
  replay_copy_fit f;
  f.h2d = fit_direction(copies, transfer_direction::h2d, block_bytes, layers, f.h2d_copies);
  f.d2h = fit_direction(copies, transfer_direction::d2h, block_bytes, layers, f.d2h_copies);
  return f;
}

std::string replay_fit_refusal(const replay_copy_fit& fit) {
  for (const link_sweep* w : {&fit.h2d, &fit.d2h})
    if (!w->rejected.empty())
      return std::string("the ") + name_of(w->direction) + " fit to the replay's copies: "
             + w->rejected;
  return "";
}

std::optional<double> fit_layer_wait(const std::vector<waited_step>& steps, uint32_t layers,
                                     size_t* used) {
  constexpr double in_place_ns = 1000;
  std::vector<double> per_layer;
  for (const waited_step& s : steps)
    if (layers > 0 && s.modelled_data_wait_ns < in_place_ns)
      per_layer.push_back(s.measured_stall_ns / layers);
  if (used != nullptr)
    *used = per_layer.size();
  if (per_layer.size() < step_fit_steps_min)
    return std::nullopt;
  std::sort(per_layer.begin(), per_layer.end());
  return per_layer[per_layer.size() / 2];
}

std::optional<double> fit_submit_per_block(const std::vector<step_delay>& steps, size_t* used) {
  std::vector<double> plain;
  for (const step_delay& s : steps)
    if (s.swap_in_blocks == 0)
      plain.push_back(s.extra_ns);
  std::vector<double> per_block;
  if (!plain.empty()) {
    std::sort(plain.begin(), plain.end());
    double base = plain[plain.size() / 2];
    for (const step_delay& s : steps)
      if (s.swap_in_blocks > 0)
        per_block.push_back(std::max(0.0, s.extra_ns - base) / s.swap_in_blocks);
  }
  if (used != nullptr)
    *used = per_block.size();
  if (per_block.size() < step_fit_steps_min)
    return std::nullopt;
  std::sort(per_block.begin(), per_block.end());
  return per_block[per_block.size() / 2];
}

nlohmann::json replay_calibration_json(nlohmann::json base, const replay_copy_fit& fit,
                                       const nlohmann::json& source, const step_fit& steps) {
  if (steps.layer_wait_ns)
    base["compute"]["layer_wait_us"] = *steps.layer_wait_ns / 1e3;
  if (steps.submit_ns_per_block)
    base["h2d"]["submit_us_per_block"] = *steps.submit_ns_per_block / 1e3;
  base["h2d"]["bandwidth_gbps"] = fit.h2d.fit.bandwidth_gbps;
  base["h2d"]["latency_us"] = fit.h2d.fit.latency_us;
  base["h2d"]["layer_latency_us"] = fit.h2d.fit.layer_latency_us;
  base["d2h"]["bandwidth_gbps"] = fit.d2h.fit.bandwidth_gbps;
  base["d2h"]["latency_us"] = fit.d2h.fit.latency_us;
  nlohmann::json src = source;
  src["h2d_max_residual"] = fit.h2d.max_residual;
  src["d2h_max_residual"] = fit.d2h.max_residual;
  base["source"] = src;
  return base;
}

std::string format_replay_fit(const replay_copy_fit& fit) {
  std::string out;
  rows(fit.h2d, fit.h2d_copies, out);
  rows(fit.d2h, fit.d2h_copies, out);
  return out;
}

}  // namespace kvtier::gpu
