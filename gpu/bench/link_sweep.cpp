// The calibration sweep's fit. A two-point fit (a few blocks and the full 2 GiB transfer) let one
// slow small transfer set the whole fixed cost (836.7 us on an H200, against 115-140 us on
// H100s; docs/gpu.md): fitting every size by relative error, and showing each size's residual,
// makes such a point visible, and one that the line cannot absorb refuses the calibration.

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "gpu/bench/transfer_bench.hpp"

namespace kvtier::gpu {

namespace {

struct line {
  double fixed_ns = 0;
  double ns_per_byte = 0;
};

/// Least squares of (fixed + slope * bytes - t) / t over the used points; fixed >= 0.
line fit_relative(const std::vector<sweep_point>& points) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const sweep_point& p : points) {
    if (!p.used)
      continue;
    double t = p.fitted_source_ns();
    double w = 1.0 / (t * t);
    double x = static_cast<double>(p.bytes);
    sw += w;
    sx += w * x;
    sy += w * t;
    sxx += w * x * x;
    sxy += w * x * t;
  }
  line l;
  double det = sw * sxx - sx * sx;
  if (det > 0) {
    l.ns_per_byte = (sw * sxy - sx * sy) / det;
    l.fixed_ns = (sy - l.ns_per_byte * sx) / sw;
  }
  if (l.fixed_ns < 0 || det <= 0) {  // through the origin
    l.fixed_ns = 0;
    l.ns_per_byte = sxx > 0 ? sxy / sxx : 0;
  }
  return l;
}

/// Sets each point's fitted value; returns the index of the used point that misses most.
size_t apply(const line& l, std::vector<sweep_point>& points, double& worst) {
  size_t at = 0;
  worst = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    sweep_point& p = points[i];
    p.fitted_ns = l.fixed_ns + l.ns_per_byte * static_cast<double>(p.bytes);
    if (p.used && std::abs(p.residual()) >= worst) {
      worst = std::abs(p.residual());
      at = i;
    }
  }
  return at;
}

std::string percent(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+.1f%%", 100 * x);
  return buf;
}

size_t used_count(const std::vector<sweep_point>& points) {
  size_t n = 0;
  for (const sweep_point& p : points)
    n += p.used ? 1 : 0;
  return n;
}

}  // namespace

std::vector<uint32_t> sweep_sizes(uint32_t blocks) {
  std::vector<uint32_t> sizes;
  for (uint32_t k = 1; k < blocks; k *= 2)
    sizes.push_back(k);
  if (blocks > 0)
    sizes.push_back(blocks);
  return sizes;
}

link_sweep fit_sweep(transfer_direction d, transfer_method m, std::vector<sweep_point> points,
                     uint32_t layers, size_t max_left_out) {
  link_sweep s;
  s.direction = d;
  s.points = std::move(points);
  if (s.points.size() < 2) {
    s.rejected = "the sweep has fewer than two sizes";
    return s;
  }
  line l = fit_relative(s.points);
  size_t worst = apply(l, s.points, s.max_residual);
  std::string left_out;
  for (size_t n = 0; s.max_residual > sweep_residual_max && n < max_left_out; ++n) {
    if (used_count(s.points) <= 2)
      break;
    s.points[worst].used = false;
    left_out += (left_out.empty() ? "" : ", ") + std::to_string(s.points[worst].blocks)
                + "-block copies, " + percent(s.points[worst].residual());
    l = fit_relative(s.points);
    worst = apply(l, s.points, s.max_residual);
  }
  if (s.max_residual > sweep_residual_max && s.points.size() > 2)
    s.rejected = "the fit misses " + std::to_string(s.points[worst].blocks) + "-block copies by "
                 + percent(s.points[worst].residual())
                 + (left_out.empty() ? "" : " (with " + left_out + ", left out)")
                 + "; the limit is " + percent(sweep_residual_max);
  if (l.ns_per_byte <= 0 && s.rejected.empty())
    s.rejected = "the sweep's times do not grow with the bytes";
  s.fit.method = m;
  s.fit.bandwidth_gbps = l.ns_per_byte > 0 ? 1.0 / l.ns_per_byte : 0;  // bytes per ns == GB/s
  s.fit.latency_us = l.fixed_ns / 1e3;
  if (d == transfer_direction::h2d && layers > 0)
    s.fit.layer_latency_us = s.fit.latency_us / layers;
  return s;
}

void refit_d2h_through(const std::vector<condition_figure>& replay_like, block_size_figures& s,
                       uint32_t layers) {
  for (link_sweep& w : s.sweeps) {
    if (w.direction != transfer_direction::d2h)
      continue;
    std::vector<sweep_point> points = w.points;
    for (sweep_point& p : points) {
      p.used = true;
      for (const condition_figure& c : replay_like)
        if (c.condition == copy_condition::replay_like && c.direction == w.direction
            && c.blocks == p.blocks)
          p.replay_like_ns = c.median_ns;
    }
    w = fit_sweep(w.direction, w.fit.method, points, layers);
    s.d2h_fit = w.fit;
  }
}

}  // namespace kvtier::gpu
