// `kvtier model-fit`: the roofline step model held to the published measurements of
// measurements/step_times.json. Fits the factors data sheets do not give on half of the points
// and reports the error on the other half, by leave-one-source-out and on all points; writes the
// tables of docs/models.md between its markers (--write-doc) or checks that the file and the
// GPU presets agree with a fresh fit (--check, run by ctest). docs/models.md, "Calibration".

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "app/commands.hpp"
#include "app/model_fit_data.hpp"
#include "core/build_info.hpp"
#include "model/scheduler/step_fit.hpp"
#include "runtime/config/compute_config.hpp"
#include "runtime/config/presets.hpp"
#include "runtime/config/replay_config.hpp"
#include "runtime/config/strict_json.hpp"

namespace kvtier {

namespace {

using nlohmann::json;
using model_fit::data_set;
using model_fit::fmt;
using model_fit::percent;
using model_fit::point;
using model_fit::read_data;

const char* const begin_marker = "<!-- BEGIN kvtier model-fit -->";
const char* const end_marker = "<!-- END kvtier model-fit -->";

// ---------------------------------------------------------------------------------- the fits

struct fit_results {
  step_factors all;                       ///< on every point
  step_factors first, second;             ///< on the first half, on the second
  std::vector<bool> second_half;          ///< per point: in the second half
  std::map<std::string, step_factors> loso;  ///< per source: on every other source
  /// half_error: each point predicted by the fit on the other half.
  std::vector<double> all_error, half_error, loso_error;
};

std::vector<const step_measurement*> select(const std::vector<point>& pts,
                                            const std::function<bool(size_t)>& keep) {
  std::vector<const step_measurement*> out;
  for (size_t i = 0; i < pts.size(); ++i)
    if (keep(i))
      out.push_back(&pts[i].m);
  return out;
}

// Points in (source, id) order, every other one in the second half: two halves of one size,
// both seeing every source of two points or more.
std::vector<bool> split(const std::vector<point>& pts) {
  std::vector<size_t> order(pts.size());
  for (size_t i = 0; i < pts.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::tie(pts[a].m.source, pts[a].m.id) < std::tie(pts[b].m.source, pts[b].m.id);
  });
  std::vector<bool> held(pts.size(), false);
  for (size_t k = 1; k < order.size(); k += 2)
    held[order[k]] = true;
  return held;
}

fit_results run_fits(const std::vector<point>& pts) {
  fit_results r;
  r.second_half = split(pts);
  r.all = fit_step_factors(select(pts, [](size_t) { return true; }));
  r.first = fit_step_factors(select(pts, [&](size_t i) { return !r.second_half[i]; }));
  r.second = fit_step_factors(select(pts, [&](size_t i) { return r.second_half[i]; }));
  std::set<std::string> sources;
  for (const point& p : pts)
    sources.insert(p.m.source);
  for (const std::string& s : sources)
    r.loso[s] = fit_step_factors(select(pts, [&](size_t i) { return pts[i].m.source != s; }));
  for (size_t i = 0; i < pts.size(); ++i) {
    const step_measurement& m = pts[i].m;
    r.all_error.push_back(relative_error(m, r.all));
    r.half_error.push_back(relative_error(m, r.second_half[i] ? r.first : r.second));
    r.loso_error.push_back(relative_error(m, r.loso.at(m.source)));
  }
  return r;
}

// ------------------------------------------------------------------------------- the tables

struct summary {
  double rms = 0, worst = 0;
  std::string worst_id;
  size_t n = 0;
};

summary summarize(const std::vector<point>& pts, const std::vector<double>& err,
                  const std::function<bool(size_t)>& keep) {
  summary s;
  std::vector<double> e;
  for (size_t i = 0; i < pts.size(); ++i) {
    if (!keep(i))
      continue;
    e.push_back(err[i]);
    if (std::abs(err[i]) > std::abs(s.worst)) {
      s.worst = err[i];
      s.worst_id = pts[i].m.id;
    }
  }
  s.rms = rms(e);
  s.n = e.size();
  return s;
}

std::string summary_text(const summary& s) {
  return "RMS " + fmt("%.1f%%", 100 * s.rms) + " over " + std::to_string(s.n) +
         " points, largest " + percent(s.worst) + " (`" + s.worst_id + "`)";
}

void factors_table(std::ostream& o, const step_factors& f) {
  o << "| GPU | compute efficiency | memory efficiency |\n|---|---|---|\n";
  for (const auto& [gpu, g] : f.gpus)
    o << "| `" << gpu << "` | " << fmt("%.3f", g.compute_efficiency) << " | "
      << fmt("%.3f", g.memory_efficiency) << " |\n";
  o << "\nShared by every GPU: step overhead " << fmt("%.0f", f.step_overhead_us)
    << " us, attention efficiency " << fmt("%.3f", f.attention_efficiency)
    << ", overlap " << fmt("%.3f", f.overlap) << ", layer overhead "
    << fmt("%.1f", f.layer_overhead_us) << " us, MoE layer overhead "
    << fmt("%.1f", f.moe_layer_overhead_us) << " us, MoE expert overhead "
    << fmt("%.2f", f.moe_expert_overhead_us)
    << " us per expert a step's tokens go to, per MoE layer.\n";
}

void sources_table(std::ostream& o, const std::vector<point>& pts, const fit_results& r,
                   const json& sources) {
  o << "| source | engine | version | points | held-out RMS | leave-one-source-out RMS | its "
       "largest |\n|---|---|---|---|---|---|---|\n";
  for (const auto& [name, factors] : r.loso) {
    auto mine = [&](size_t i) { return pts[i].m.source == name; };
    summary held = summarize(pts, r.half_error, mine);
    summary lo = summarize(pts, r.loso_error, mine);
    const json& s = sources.at(name);
    o << "| [" << name << "](" << s.at("url").get<std::string>() << ") | "
      << s.at("engine").get<std::string>() << " | " << s.at("engine_version").get<std::string>()
      << " | " << lo.n << " | " << fmt("%.1f%%", 100 * held.rms) << " | "
      << fmt("%.1f%%", 100 * lo.rms) << " | " << percent(lo.worst) << " |\n";
  }
}

void points_table(std::ostream& o, const std::vector<point>& pts, const fit_results& r) {
  o << "| point | model | GPU x TP | weights / KV | kind | shape | measured | predicted "
       "(all) | error (all) | held out (its half) | leave source out |\n"
       "|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (size_t i = 0; i < pts.size(); ++i) {
    const point& p = pts[i];
    double predicted = predict_seconds(p.m, r.all);
    o << "| `" << p.m.id << "` | " << p.model << " | " << p.m.gpu << " x " << p.tp << " | "
      << p.weights << " / " << p.kv << " | " << p.kind_text << " | " << p.shape_text << " | "
      << p.measured_text << " | " << p.in_unit(predicted) << " | "
      << percent(r.all_error[i]) << " | " << (r.second_half[i] ? "2: " : "1: ")
      << percent(r.half_error[i]) << " | " << percent(r.loso_error[i]) << " |\n";
  }
}

void misses(std::ostream& o, const std::vector<point>& pts, const fit_results& r) {
  std::vector<std::string> lines;
  for (size_t i = 0; i < pts.size(); ++i) {
    bool held = std::abs(r.half_error[i]) > 0.30;
    bool lo = std::abs(r.loso_error[i]) > 0.30;
    if (held || lo)
      lines.push_back("`" + pts[i].m.id + "`" +
                      (held ? " held out " + percent(r.half_error[i]) : std::string()) +
                      (lo ? " left out with its source " + percent(r.loso_error[i])
                          : std::string()));
  }
  if (lines.empty()) {
    o << "No point misses by more than 30%, held out or left out with its source.\n";
    return;
  }
  o << "Points off by more than 30%:\n\n";
  for (const std::string& l : lines)
    o << "- " << l << "\n";
}

// The presets' predictions at standard points: what docs/models.md shows a reader who picks one.
struct deployment {
  const char* model;
  const char* gpu;
  uint32_t tp;
  const char* weights;  ///< nullptr: the model's own
};

const deployment standard_deployments[] = {
  {"llama3-8b", "a100", 1, nullptr},         {"llama3-8b", "h100-sxm", 1, nullptr},
  {"llama3-8b", "h200", 1, nullptr},         {"llama3-8b", "b200", 1, nullptr},
  {"llama3-8b", "mi300x", 1, nullptr},       {"llama3-8b", "h100-sxm", 1, "fp8"},
  {"llama3-70b", "h100-sxm", 4, nullptr},    {"llama3-70b", "h100-sxm", 1, "int4"},
  {"llama3-70b", "h200", 8, nullptr},        {"llama3-70b", "b200", 1, "fp4"},
  {"qwen2.5-7b", "h100-sxm", 1, nullptr},    {"mixtral-8x7b", "h100-sxm", 2, nullptr},
  {"qwen3-235b-a22b", "h200", 8, nullptr},   {"deepseek-v3", "h200", 8, nullptr},
  {"deepseek-v3", "b200", 8, nullptr},       {"deepseek-v3", "a100", 8, nullptr},
};

std::string step_ms(const compute_profile& p, const batch_shape& b) {
  roofline_parts parts = roofline_of(p.roofline, b);
  double ms = (p.roofline.gpu.step_overhead_us * 1e3 + parts.work_ns()) / 1e6;
  return fmt("%.1f", ms) + (parts.compute_bound() ? " (c)" : " (m)");
}

void predictions_table(std::ostream& o) {
  o << "| model | GPU | TP | weights | KV B/token/rank | device tier (tokens) | prefill 1k | "
       "prefill 8k | prefill 32k | decode b1 | decode b32 | decode b256 |\n"
       "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const deployment& d : standard_deployments) {
    config c;
    c.set(std::string("preset.model=") + d.model);
    c.set(std::string("preset.gpu=") + d.gpu);
    c.set("parallel.tp=" + std::to_string(d.tp));
    if (d.weights)
      c.set(std::string("model.weight_dtype=") + d.weights);
    model_spec m = resolve_model_spec(c);
    parallelism par = resolve_parallelism(c, m);
    compute_profile p = resolve_compute(c, m, par);
    std::string tier;
    try {
      replay_config rc = resolve(c);
      tier = std::to_string(uint64_t{rc.cache.device_blocks} * rc.block_size);
    } catch (const config_error&) {
      tier = "does not fit";
    }
    o << "| `" << d.model << "` | `" << d.gpu << "` | " << d.tp << " | " << m.weight_dtype
      << " | " << shape_per_rank(m, par).bytes_per_token() << " | " << tier;
    for (uint64_t prompt : {1024, 8192, 32768}) {
      batch_shape b;
      b.add_prefill(0, prompt);
      o << " | " << step_ms(p, b);
    }
    for (uint32_t batch : {1, 32, 256}) {
      batch_shape b;
      for (uint32_t i = 0; i < batch; ++i)
        b.add_decode(1024);
      o << " | " << step_ms(p, b);
    }
    o << " |\n";
  }
}

std::string tables(const data_set& d, const fit_results& r) {
  std::ostringstream o;
  const auto& pts = d.points;
  auto all = [](size_t) { return true; };
  o << begin_marker << "\n<!-- written by `kvtier model-fit --write-doc docs/models.md` from "
    << "measurements/step_times.json; do not edit by hand -->\n\n";
  auto second = [&](size_t i) { return r.second_half[i]; };
  auto first = [&](size_t i) { return !r.second_half[i]; };
  o << "**Held out.** The points in source and id order, every other one in half 2: a fit on "
    << "half 1 predicts half 2 with " << summary_text(summarize(pts, r.half_error, second))
    << "; a fit on half 2 predicts half 1 with "
    << summary_text(summarize(pts, r.half_error, first)) << "; every point held out once: "
    << summary_text(summarize(pts, r.half_error, all)) << ".\n\n**Leave one source out.** "
    << "Each source predicted by a fit on all the others: "
    << summary_text(summarize(pts, r.loso_error, all)) << ".\n\n**All points.** The fit "
    << "the presets carry, on every point: " << summary_text(summarize(pts, r.all_error, all))
    << ".\n\n";
  factors_table(o, r.all);
  o << "\n";
  sources_table(o, pts, r, d.sources);
  o << "\n";
  points_table(o, pts, r);
  o << "\n";
  misses(o, pts, r);
  o << "\n**Predictions at standard points**, from the presets as compiled, in ms: one prompt "
       "prefilled from an empty cache; a decode step of every sequence at context 1024. (c) "
       "compute-bound, (m) memory-bound. The device tier is what `cache.device_tokens` "
       "defaults to under the presets (docs/models.md, \"Memory must fit\").\n\n";
  predictions_table(o);
  o << "\n" << end_marker << "\n";
  return o.str();
}

// ------------------------------------------------------------- presets and docs, checked

// Differences between the fitted GPU presets and the all-points fit, as the tables round them.
std::vector<std::string> preset_drift(const step_factors& f) {
  std::vector<std::string> out;
  auto check = [&](const std::string& gpu, const char* key, double fitted, const char* format) {
    double preset = gpu_preset(gpu).at(key).get<double>();
    if (fmt(format, preset) != fmt(format, fitted))
      out.push_back("preset.gpu=" + gpu + " sets " + key + " = " + fmt(format, preset) +
                    "; the fit gives " + fmt(format, fitted));
  };
  for (const auto& [gpu, g] : f.gpus) {
    check(gpu, "gpu.compute_efficiency", g.compute_efficiency, "%.3f");
    check(gpu, "gpu.memory_efficiency", g.memory_efficiency, "%.3f");
  }
  for (const char* gpu : gpu_preset_names()) {
    check(gpu, "gpu.step_overhead_us", f.step_overhead_us, "%.0f");
    check(gpu, "gpu.attention_efficiency", f.attention_efficiency, "%.3f");
    check(gpu, "gpu.overlap", f.overlap, "%.3f");
    check(gpu, "gpu.layer_overhead_us", f.layer_overhead_us, "%.1f");
    check(gpu, "gpu.moe_layer_overhead_us", f.moe_layer_overhead_us, "%.1f");
    check(gpu, "gpu.moe_expert_overhead_us", f.moe_expert_overhead_us, "%.2f");
  }
  return out;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw config_error(path + ": cannot read");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The document with its marked block replaced by `block`.
std::string with_block(const std::string& doc, const std::string& block, const std::string& path) {
  size_t b = doc.find(begin_marker), e = doc.find(end_marker);
  if (b == std::string::npos || e == std::string::npos || e < b)
    throw config_error(path + ": no '" + begin_marker + "' ... '" + end_marker + "' block");
  size_t end = doc.find('\n', e);
  end = end == std::string::npos ? doc.size() : end + 1;
  return doc.substr(0, b) + block + doc.substr(end);
}

int check_doc(const std::string& path, const std::string& block, const step_factors& all) {
  std::string doc = read_text(path);
  bool stale = with_block(doc, block, path) != doc;
  std::vector<std::string> drift = preset_drift(all);
  if (stale)
    std::cerr << "kvtier model-fit: " << path << " differs from a fresh fit; run kvtier "
              << "model-fit --write-doc " << path << "\n";
  for (const std::string& d : drift)
    std::cerr << "kvtier model-fit: " << d << " (runtime/config/presets.cpp)\n";
  return stale || !drift.empty() ? exit_failure : exit_ok;
}

}  // namespace

CLI::App* add_model_fit_command(CLI::App& app, model_fit_args& args) {
  auto* cmd = app.add_subcommand(
    "model-fit", "Fit the roofline step model to published measurements; report held-out error");
  cmd->add_option("--data", args.data, "measurement file (measurements/step_times.json)");
  cmd->add_option("--write-doc", args.write_doc,
                  "replace the marked block of this markdown file with the tables");
  cmd->add_option("--check", args.check,
                  "exit 1 when this file's block or the GPU presets differ from a fresh fit");
  cmd->add_option("--json", args.json_out, "also write every point's errors and the fits");
  return cmd;
}

int run_model_fit(const model_fit_args& args) {
  data_set d = read_data(args.data);
  fit_results r = run_fits(d.points);
  std::string block = tables(d, r);
  if (!args.json_out.empty()) {
    json j = {{"kvtier", build_line()}, {"points", json::array()}};
    for (size_t i = 0; i < d.points.size(); ++i)
      j["points"].push_back({{"id", d.points[i].m.id},
                             {"measured_s", d.points[i].m.measured_s},
                             {"predicted_s", predict_seconds(d.points[i].m, r.all)},
                             {"error_all", r.all_error[i]},
                             {"half", r.second_half[i] ? 2 : 1},
                             {"error_held_out", r.half_error[i]},
                             {"error_leave_source_out", r.loso_error[i]}});
    std::ofstream(args.json_out) << j.dump(1) << '\n';
  }
  if (!args.check.empty())
    return check_doc(args.check, block, r.all);
  if (!args.write_doc.empty()) {
    std::string doc = with_block(read_text(args.write_doc), block, args.write_doc);
    std::ofstream(args.write_doc, std::ios::binary) << doc;
    for (const std::string& drift : preset_drift(r.all))
      std::cerr << "kvtier model-fit: " << drift << " (runtime/config/presets.cpp)\n";
    return exit_ok;
  }
  std::cout << block;
  return exit_ok;
}

}  // namespace kvtier
