#include "model/scheduler/step_fit.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "model/scheduler/cost_model.hpp"

namespace kvtier {

namespace {

// A static batch's decode steps are grouped into at most this many runs of equal steps, each at
// its run's middle context: the step model is linear in the context within a run.
constexpr uint64_t decode_runs = 16;

double step_seconds(const roofline_profile& r, const batch_shape& b) {
  return (r.gpu.step_overhead_us * 1000.0 + roofline_of(r, b).work_ns()) / 1e9;
}

batch_shape prefills(uint64_t count, uint64_t prompt) {
  batch_shape b;
  for (uint64_t i = 0; i < count; ++i)
    b.add_prefill(0, prompt);
  return b;
}

batch_shape decodes(uint64_t count, double context) {
  batch_shape b;
  b.decode_seqs = static_cast<uint32_t>(count);
  b.decode_context = static_cast<uint64_t>(std::llround(context * static_cast<double>(count)));
  return b;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double logit(double p) { return std::log(p / (1.0 - p)); }

// The free parameters: per GPU (sorted by name) logit compute and memory efficiency; then the
// square root of the step overhead, logit attention efficiency, logit overlap and the square
// roots of the two layer overheads and of the per-expert overhead.
struct layout {
  std::vector<std::string> gpus;
};

step_factors unpack(const layout& l, const std::vector<double>& x) {
  step_factors f;
  size_t i = 0;
  for (const std::string& g : l.gpus) {
    gpu_factors& gf = f.gpus[g];
    gf.compute_efficiency = sigmoid(x[i++]);
    gf.memory_efficiency = sigmoid(x[i++]);
  }
  f.step_overhead_us = x[i] * x[i];
  ++i;
  f.attention_efficiency = sigmoid(x[i++]);
  f.overlap = sigmoid(x[i++]);
  f.layer_overhead_us = x[i] * x[i];
  ++i;
  f.moe_layer_overhead_us = x[i] * x[i];
  ++i;
  f.moe_expert_overhead_us = x[i] * x[i];
  return f;
}

std::vector<double> pack(const layout& l, const step_factors& f) {
  std::vector<double> x;
  auto clamp_logit = [](double p) { return logit(std::clamp(p, 1e-4, 1.0 - 1e-4)); };
  for (const std::string& g : l.gpus) {
    const gpu_factors& gf = f.gpus.at(g);
    x.push_back(clamp_logit(gf.compute_efficiency));
    x.push_back(clamp_logit(gf.memory_efficiency));
  }
  x.push_back(std::sqrt(f.step_overhead_us));
  x.push_back(clamp_logit(f.attention_efficiency));
  x.push_back(clamp_logit(f.overlap));
  x.push_back(std::sqrt(f.layer_overhead_us));
  x.push_back(std::sqrt(f.moe_layer_overhead_us));
  x.push_back(std::sqrt(f.moe_expert_overhead_us));
  return x;
}

std::vector<double> residuals(const std::vector<const step_measurement*>& points,
                              const step_factors& f) {
  std::vector<double> r;
  r.reserve(points.size());
  for (const step_measurement* p : points)
    r.push_back(relative_error(*p, f));
  return r;
}

double sum_of_squares(const std::vector<double>& r) {
  double s = 0;
  for (double v : r)
    s += v * v;
  return s;
}

// Solves a x = b for a symmetric positive definite `a` (n x n, row-major) by Cholesky; false if
// it is not positive definite.
bool solve_spd(std::vector<double> a, std::vector<double>& b, size_t n) {
  for (size_t j = 0; j < n; ++j) {
    double d = a[j * n + j];
    for (size_t k = 0; k < j; ++k)
      d -= a[j * n + k] * a[j * n + k];
    if (!(d > 0))
      return false;
    d = std::sqrt(d);
    a[j * n + j] = d;
    for (size_t i = j + 1; i < n; ++i) {
      double s = a[i * n + j];
      for (size_t k = 0; k < j; ++k)
        s -= a[i * n + k] * a[j * n + k];
      a[i * n + j] = s / d;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    double s = b[i];
    for (size_t k = 0; k < i; ++k)
      s -= a[i * n + k] * b[k];
    b[i] = s / a[i * n + i];
  }
  for (size_t i = n; i-- > 0;) {
    double s = b[i];
    for (size_t k = i + 1; k < n; ++k)
      s -= a[k * n + i] * b[k];
    b[i] = s / a[i * n + i];
  }
  return true;
}

// Levenberg-Marquardt from `x`; returns the parameters and leaves the cost in `cost`.
std::vector<double> levenberg_marquardt(const std::vector<const step_measurement*>& points,
                                        const layout& l, std::vector<double> x, double& cost) {
  const size_t n = x.size(), m = points.size();
  std::vector<double> r = residuals(points, unpack(l, x));
  cost = sum_of_squares(r);
  double lambda = 1e-3;
  for (int iter = 0; iter < 300; ++iter) {
    // Forward-difference Jacobian, m x n.
    std::vector<double> jac(m * n);
    for (size_t j = 0; j < n; ++j) {
      std::vector<double> xh = x;
      double h = 1e-6 * std::max(1.0, std::abs(x[j]));
      xh[j] += h;
      std::vector<double> rh = residuals(points, unpack(l, xh));
      for (size_t i = 0; i < m; ++i)
        jac[i * n + j] = (rh[i] - r[i]) / h;
    }
    std::vector<double> jtj(n * n, 0.0), jtr(n, 0.0);
    for (size_t i = 0; i < m; ++i)
      for (size_t a = 0; a < n; ++a) {
        jtr[a] += jac[i * n + a] * r[i];
        for (size_t b = 0; b < n; ++b)
          jtj[a * n + b] += jac[i * n + a] * jac[i * n + b];
      }
    bool improved = false;
    for (int tries = 0; tries < 20 && !improved; ++tries) {
      std::vector<double> a = jtj, step(n);
      for (size_t k = 0; k < n; ++k) {
        a[k * n + k] += lambda * std::max(jtj[k * n + k], 1e-12);
        step[k] = -jtr[k];
      }
      if (!solve_spd(a, step, n)) {
        lambda *= 10;
        continue;
      }
      std::vector<double> xn = x;
      for (size_t k = 0; k < n; ++k)
        xn[k] += std::clamp(step[k], -5.0, 5.0);
      std::vector<double> rn = residuals(points, unpack(l, xn));
      double cn = sum_of_squares(rn);
      if (std::isfinite(cn) && cn < cost) {
        double gain = cost - cn;
        x = xn;
        r = rn;
        cost = cn;
        lambda = std::max(lambda / 3, 1e-9);
        improved = true;
        if (gain < 1e-12 * std::max(cost, 1e-12))
          return x;
      } else {
        lambda *= 4;
      }
    }
    if (!improved)
      return x;
  }
  return x;
}

}  // namespace

gpu_spec with_factors(const step_measurement& m, const step_factors& f) {
  gpu_spec g = m.profile.gpu;
  gpu_factors gf;
  auto it = f.gpus.find(m.gpu);
  if (it != f.gpus.end()) {
    gf = it->second;
  } else if (!f.gpus.empty()) {
    gf = gpu_factors{0, 0};
    for (const auto& [name, v] : f.gpus) {
      gf.compute_efficiency += v.compute_efficiency / f.gpus.size();
      gf.memory_efficiency += v.memory_efficiency / f.gpus.size();
    }
  }
  g.compute_efficiency = gf.compute_efficiency;
  g.memory_efficiency = gf.memory_efficiency;
  g.step_overhead_us = f.step_overhead_us;
  g.attention_efficiency = f.attention_efficiency;
  g.overlap = f.overlap;
  g.layer_overhead_us = f.layer_overhead_us;
  g.moe_layer_overhead_us = f.moe_layer_overhead_us;
  g.moe_expert_overhead_us = f.moe_expert_overhead_us;
  return g;
}

namespace {

// The prefill of `m`'s batch: all of each prompt, or all but its last token where a decode step
// takes that one (first_token_step::decode); none for a one-token prompt there.
double prefill_seconds(const roofline_profile& r, const step_measurement& m) {
  uint64_t tokens = m.first_token == first_token_step::decode && m.prompt > 0 ? m.prompt - 1
                                                                             : m.prompt;
  return tokens > 0 ? step_seconds(r, prefills(m.batch, tokens)) : 0.0;
}

// The decode steps of a static batch: step k attends to prompt + k tokens, k from 1 to
// output - 1 (the prefill sampled the first token) or from 0 (a decode step takes the prompt's
// last token and samples it), in at most decode_runs runs each at its middle context.
double decode_seconds(const roofline_profile& r, const step_measurement& m) {
  uint64_t first = m.first_token == first_token_step::decode ? 0 : 1;
  uint64_t steps = m.output > first ? m.output - first : 0;
  uint64_t runs = std::min(steps, decode_runs);
  double total = 0;
  for (uint64_t i = 0; i < runs; ++i) {
    // k = first + lo .. first + hi - 1
    uint64_t lo = i * steps / runs, hi = (i + 1) * steps / runs;
    double middle = static_cast<double>(m.prompt + first) + (lo + hi - 1) / 2.0;
    total += static_cast<double>(hi - lo) * step_seconds(r, decodes(m.batch, middle));
  }
  return total;
}

}  // namespace

double predict_seconds(const step_measurement& m, const step_factors& f) {
  roofline_profile r = m.profile;
  r.gpu = with_factors(m, f);
  switch (m.kind) {
    case measured_kind::prefill:
      if (m.first_token == first_token_step::decode)
        return prefill_seconds(r, m) +
               step_seconds(r, decodes(m.batch, static_cast<double>(m.prompt)));
      return step_seconds(r, prefills(m.batch, m.prompt));
    case measured_kind::decode:
      return step_seconds(r, decodes(m.batch, static_cast<double>(m.context)));
    case measured_kind::prefill_stream:
      return static_cast<double>(m.prompts) * step_seconds(r, prefills(1, m.prompt));
    case measured_kind::generate:
      return prefill_seconds(r, m) + decode_seconds(r, m);
  }
  return 0;
}

double relative_error(const step_measurement& m, const step_factors& f) {
  return predict_seconds(m, f) / m.measured_s - 1.0;
}

step_factors fit_step_factors(const std::vector<const step_measurement*>& points) {
  layout l;
  std::set<std::string> names;
  for (const step_measurement* p : points)
    names.insert(p->gpu);
  l.gpus.assign(names.begin(), names.end());
  step_factors best;
  double best_cost = INFINITY;
  // A few starts across the overlap's range: the max and the sum are different valleys.
  for (double overlap : {0.1, 0.5, 0.9}) {
    step_factors start;
    for (const std::string& g : l.gpus)
      start.gpus[g] = gpu_factors{};
    start.overlap = overlap;
    double cost = 0;
    std::vector<double> x = levenberg_marquardt(points, l, pack(l, start), cost);
    if (cost < best_cost) {
      best_cost = cost;
      best = unpack(l, x);
    }
  }
  return best;
}

double rms(const std::vector<double>& errors) {
  if (errors.empty())
    return 0;
  return std::sqrt(sum_of_squares(errors) / static_cast<double>(errors.size()));
}

}  // namespace kvtier
