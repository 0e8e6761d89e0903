#include "sim/full/timed_config.hpp"

#include <fstream>

#include <nlohmann/json.hpp>

namespace kvtier {

namespace {

int64_t us_to_ns(double us) {
  return static_cast<int64_t>(us * 1000.0 + 0.5);
}

// Reads a calibration written by `kvtier bench transfer --emit-calibration` into `links`.
void apply_calibration(const std::string& path, link_options& links) {
  std::ifstream in(path);
  if (!in)
    throw config_error("links.calibration: " + path + ": cannot open");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {  // a syntax error, or a number out of range
    throw config_error("links.calibration: " + path + ": not valid JSON: " + e.what());
  }
  auto number = [&](const char* section, const char* field) {
    const nlohmann::json* v = &j;
    std::string name = field;
    if (section) {
      name = std::string(section) + "." + field;
      if (!j.contains(section) || !j[section].is_object())
        throw config_error("links.calibration: " + path + ": missing object '" + section + "'");
      v = &j[section];
    }
    if (!v->contains(field) || !(*v)[field].is_number() || (*v)[field].get<double>() < 0)
      throw config_error("links.calibration: " + path + ": field '" + name +
                         "': expected a non-negative number");
    return (*v)[field].get<double>();
  };
  if (j.value("schema", "") != "kvtier.calibration/1")
    throw config_error("links.calibration: " + path +
                       ": field 'schema': expected \"kvtier.calibration/1\"");
  links.h2d_gbps = number("h2d", "bandwidth_gbps");
  links.h2d_layer_latency_ns = us_to_ns(number("h2d", "layer_latency_us"));
  links.d2h_gbps = number("d2h", "bandwidth_gbps");
  links.d2h_latency_ns = us_to_ns(number("d2h", "latency_us"));
  links.duplex_gbps = number(nullptr, "duplex_gbps");
  if (links.h2d_gbps <= 0 || links.d2h_gbps <= 0 || links.duplex_gbps <= 0)
    throw config_error("links.calibration: " + path + ": bandwidths must be positive");
}

}  // namespace

timed_config resolve_timed(const config& c, const replay_config& rc) {
  timed_config t;
  t.cache = rc.cache;
  t.block_bytes = rc.block_bytes();
  t.controller.block_size = rc.block_size;
  t.controller.storage_namespace = rc.storage_namespace;
  t.controller.storage = rc.storage_blocks > 0;
  t.controller.layers = rc.model.layers;

  scheduler_options& so = t.scheduler.options;
  so.block_size = rc.block_size;
  so.max_num_seqs = static_cast<uint32_t>(c.integer("scheduler.max_num_seqs"));
  so.token_budget = static_cast<uint32_t>(c.integer("scheduler.token_budget"));
  so.reserve_output_blocks = c.number("scheduler.reserve_output_blocks");
  so.reserve_decay = c.number("scheduler.reserve_decay");
  so.reserve_min = static_cast<uint32_t>(c.integer("scheduler.reserve_min"));
  so.probe_limit = static_cast<uint32_t>(c.integer("scheduler.probe_limit"));
  compute_profile& cp = t.scheduler.compute;
  cp.step_overhead_ns = c.number("compute.step_overhead_us") * 1000.0;
  cp.prefill_token_ns = c.number("compute.prefill_token_us") * 1000.0;
  cp.prefill_attention_ns = c.number("compute.prefill_attention_ns");
  cp.decode_token_ns = c.number("compute.decode_token_us") * 1000.0;
  cp.decode_context_ns = c.number("compute.decode_context_ns");
  cp.layers = rc.model.layers;
  t.scheduler.device_blocks = rc.cache.device_blocks;
  t.scheduler.time_scale = c.number("trace.time_scale");

  link_options& lo = t.engine.links;
  lo.h2d_gbps = c.number("links.h2d_gbps");
  lo.d2h_gbps = c.number("links.d2h_gbps");
  lo.duplex_gbps = c.number("links.duplex_gbps");
  lo.h2d_layer_latency_ns = us_to_ns(c.number("links.h2d_layer_latency_us"));
  lo.d2h_latency_ns = us_to_ns(c.number("links.d2h_latency_us"));
  if (c.is_set("links.calibration"))
    apply_calibration(c.text("links.calibration"), lo);
  lo.nic_gbps = c.number("links.nic_gbps");
  lo.nic_latency_ns = us_to_ns(c.number("links.nic_latency_us"));
  t.engine.layers = rc.model.layers;
  t.engine.block_bytes = rc.block_bytes();

  t.storage.capacity_blocks = rc.storage_blocks;
  t.storage.nodes = rc.storage_nodes;
  t.storage.read_gbps = c.number("storage.read_gbps");
  t.storage.write_gbps = c.number("storage.write_gbps");
  t.storage.op_latency_ns = us_to_ns(c.number("storage.op_latency_us"));
  return t;
}

}  // namespace kvtier

namespace kvtier {

void use_cuda_backend(timed_config& t, const replay_config& rc, bool verify) {
  t.cuda = true;
  cuda_backend_options& o = t.cuda_options;
  o.shape.layers = rc.model.layers;
  o.shape.kv_heads = rc.model.kv_heads;
  o.shape.head_dim = rc.model.head_dim;
  o.shape.block_size = rc.block_size;
  o.shape.dtype_bytes = rc.model.dtype_bytes;
  o.device_blocks = rc.cache.device_blocks;
  o.host_blocks = rc.cache.host_blocks;
  o.verify = verify;
  t.controller.grant_early = true;
  t.controller.verify = verify;
  t.controller.log = true;
}

}  // namespace kvtier
