#include "sim/full/timed_config.hpp"

namespace kvtier {

namespace {

int64_t us_to_ns(double us) {
  return static_cast<int64_t>(us * 1000.0 + 0.5);
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

  link_options& lo = t.engine.links;
  lo.h2d_gbps = c.number("links.h2d_gbps");
  lo.d2h_gbps = c.number("links.d2h_gbps");
  lo.duplex_gbps = c.number("links.duplex_gbps");
  lo.h2d_layer_latency_ns = us_to_ns(c.number("links.h2d_layer_latency_us"));
  lo.d2h_latency_ns = us_to_ns(c.number("links.d2h_latency_us"));
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
