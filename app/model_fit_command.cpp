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
#include "core/build_info.hpp"
#include "model/scheduler/step_fit.hpp"
#include "runtime/config/compute_config.hpp"
#include "runtime/config/presets.hpp"
#include "runtime/config/replay_config.hpp"
#include "runtime/config/strict_json.hpp"

namespace kvtier {

namespace {

using nlohmann::json;

const char* const begin_marker = "<!-- BEGIN kvtier model-fit -->";
const char* const end_marker = "<!-- END kvtier model-fit -->";

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

std::string percent(double e) { return fmt("%+.1f%%", 100.0 * e); }

// One point of the file, with the text the tables show.
struct point {
  step_measurement m;
  std::string model, weights, kv, kind_text, shape_text, measured_text, unit;
  uint32_t tp = 1;

  /// `seconds` of this point in its measured unit, as the table shows it.
  std::string in_unit(double seconds) const {
    double v = seconds;
    if (unit == "ms")
      v = seconds * 1e3;
    else if (unit == "tok/s" || unit == "tok/s/gpu")
      v = static_cast<double>(m.batch * m.output) / seconds / (unit == "tok/s/gpu" ? tp : 1);
    return fmt("%.4g", v) + " " + unit;
  }
};

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw config_error(where + ": " + what);
}

const json& field(const json& j, const char* name, const std::string& where) {
  if (!j.is_object() || !j.contains(name))
    bad(where, std::string("missing field '") + name + "'");
  return j.at(name);
}

std::string text_field(const json& j, const char* name, const std::string& where) {
  const json& v = field(j, name, where);
  if (!v.is_string())
    bad(where, std::string("field '") + name + "': expected text, got " + v.dump());
  return v.get<std::string>();
}

double number_field(const json& j, const char* name, const std::string& where, double lo) {
  const json& v = field(j, name, where);
  if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < lo)
    bad(where, std::string("field '") + name + "': expected a number of at least " +
                 fmt("%g", lo) + ", got " + v.dump());
  return v.get<double>();
}

uint64_t count_field(const json& j, const char* name, const std::string& where) {
  double v = number_field(j, name, where, 1);
  if (v != std::floor(v))
    bad(where, std::string("field '") + name + "': expected a whole number, got " + fmt("%g", v));
  return static_cast<uint64_t>(v);
}

measured_kind kind_of(const std::string& k, const std::string& where) {
  if (k == "prefill")
    return measured_kind::prefill;
  if (k == "decode")
    return measured_kind::decode;
  if (k == "generate")
    return measured_kind::generate;
  if (k == "prefill_stream")
    return measured_kind::prefill_stream;
  bad(where, "field 'kind': expected prefill, decode, generate or prefill_stream, got " + k);
}

// The deployment of a point, resolved through the presets as a replay would.
void resolve_deployment(point& p, const json& src, const std::string& where) {
  config c;
  try {
    c.set("preset.model=" + p.model);
    c.set("preset.gpu=" + p.m.gpu);
    c.set("model.weight_dtype=" + p.weights);
    c.set("model.kv_dtype=" + p.kv);
    c.set("parallel.tp=" + std::to_string(p.tp));
    p.m.profile.model = resolve_model_spec(c);
    p.m.profile.parallel = resolve_parallelism(c, p.m.profile.model);
    p.m.profile.gpu = resolve_gpu_spec(c);
  } catch (const config_error& e) {
    bad(where, e.what());
  }
  std::string reads = src.value("decode_kv_reads", std::string("grouped"));
  p.m.profile.kv_reads = reads == "per_query_head" ? decode_kv_reads::per_query_head
                                                   : decode_kv_reads::grouped;
  std::string first = src.value("first_token", std::string("prefill"));
  if (first != "prefill" && first != "decode")
    bad(where, "source '" + p.m.source +
                 "': field 'first_token': expected prefill or decode, got " + first);
  p.m.first_token = first == "decode" ? first_token_step::decode : first_token_step::prefill;
}

// The measured time of the whole point, seconds, from the value and its unit.
double measured_seconds(const point& p, double v, const std::string& unit,
                        const std::string& where) {
  if (unit == "ms")
    return v / 1e3;
  if (unit == "s")
    return v;
  if (unit != "tok/s" && unit != "tok/s/gpu")
    bad(where, "field 'unit': expected ms, s, tok/s or tok/s/gpu, got " + unit);
  if (p.m.kind != measured_kind::generate)
    bad(where, "a throughput unit needs kind generate (output tokens over the run)");
  double gpus = unit == "tok/s/gpu" ? p.tp : 1;
  return static_cast<double>(p.m.batch * p.m.output) / (v * gpus);
}

void read_shape(point& p, const json& j, const std::string& where) {
  const measured_kind k = p.m.kind;
  if (k == measured_kind::prefill_stream)
    p.m.prompts = count_field(j, "prompts", where);
  else
    p.m.batch = count_field(j, "batch", where);
  if (k != measured_kind::decode)
    p.m.prompt = count_field(j, "prompt", where);
  if (k == measured_kind::decode)
    p.m.context = count_field(j, "context", where);
  if (k == measured_kind::generate)
    p.m.output = count_field(j, "output", where);
  std::ostringstream s;
  if (k == measured_kind::prefill)
    s << "batch " << p.m.batch << " x " << p.m.prompt;
  else if (k == measured_kind::decode)
    s << "batch " << p.m.batch << " at " << p.m.context;
  else if (k == measured_kind::generate)
    s << "batch " << p.m.batch << ", " << p.m.prompt << " in, " << p.m.output << " out";
  else
    s << p.m.prompts << " x " << p.m.prompt;
  p.shape_text = s.str();
}

point read_point(const json& j, const json& sources, size_t index, const std::string& file) {
  std::string where = file + ": points[" + std::to_string(index) + "]";
  point p;
  p.m.id = text_field(j, "id", where);
  where += " (" + p.m.id + ")";
  p.m.source = text_field(j, "source", where);
  if (!sources.contains(p.m.source))
    bad(where, "field 'source': '" + p.m.source + "' is not in 'sources'");
  const json& src = sources.at(p.m.source);
  text_field(src, "engine", file + ": sources." + p.m.source);
  text_field(src, "engine_version", file + ": sources." + p.m.source);
  text_field(src, "url", file + ": sources." + p.m.source);
  p.model = text_field(j, "model", where);
  p.m.gpu = text_field(j, "gpu", where);
  p.weights = text_field(j, "weights", where);
  p.kv = text_field(j, "kv", where);
  p.tp = static_cast<uint32_t>(count_field(j, "tp", where));
  p.kind_text = text_field(j, "kind", where);
  p.m.kind = kind_of(p.kind_text, where);
  read_shape(p, j, where);
  double v = number_field(j, "measured", where, 1e-12);
  p.unit = text_field(j, "unit", where);
  p.m.measured_s = measured_seconds(p, v, p.unit, where);
  p.measured_text = fmt("%g", v) + " " + p.unit;
  text_field(j, "where", where);
  resolve_deployment(p, src, where);
  return p;
}

struct data_set {
  json sources;
  std::vector<point> points;
};

data_set read_data(const std::string& file) {
  json j = read_json_file(file, "measurement file");
  if (j.value("schema", "") != "kvtier.step_measurements/1")
    bad(file, "field 'schema': expected \"kvtier.step_measurements/1\"");
  data_set d;
  d.sources = field(j, "sources", file);
  const json& points = field(j, "points", file);
  if (!points.is_array() || points.empty())
    bad(file, "field 'points': expected a non-empty array");
  std::set<std::string> ids;
  for (size_t i = 0; i < points.size(); ++i) {
    d.points.push_back(read_point(points[i], d.sources, i, file));
    if (!ids.insert(d.points.back().m.id).second)
      bad(file, "points[" + std::to_string(i) + "]: id '" + d.points.back().m.id +
                  "' given twice");
  }
  return d;
}

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
