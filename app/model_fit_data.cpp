#include "app/model_fit_data.hpp"

#include <cstdio>
#include <set>

#include "runtime/config/compute_config.hpp"
#include "runtime/config/presets.hpp"
#include "runtime/config/replay_config.hpp"
#include "runtime/config/strict_json.hpp"

namespace kvtier::model_fit {

using nlohmann::json;

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

std::string percent(double e) { return fmt("%+.1f%%", 100.0 * e); }

namespace {

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

}  // namespace

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

}  // namespace kvtier::model_fit
