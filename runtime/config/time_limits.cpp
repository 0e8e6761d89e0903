#include "runtime/config/time_limits.hpp"

#include <algorithm>
#include <cstdio>

#include "core/time_math.hpp"

namespace kvtier {

std::string time_limit_figure(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", x);
  return buf;
}

std::string time_limit_days(double ns) {
  return time_limit_figure(ns / 86400e9) + " days";
}

namespace {

const char* const block_keys =
  "model.layers x model.kv_heads x model.head_dim x model.kv_dtype x cache.block_size";

// Moving `bytes` over a link of `gbps` (1 GB/s is one byte per ns), plus `latency_ns`.
void check_transfer(const char* what, double bytes, double gbps, double latency_ns,
                    const char* keys) {
  double ns = bytes / gbps + latency_ns;
  if (ns > static_cast<double>(op_time_limit_ns))
    throw config_error(std::string(keys) + ": " + what + " would take " + time_limit_days(ns) +
                       " of virtual time; one transfer may take at most " +
                       time_limit_days(static_cast<double>(op_time_limit_ns)));
}

}  // namespace

void check_time_limits(const instance_config& t, const storage_options& storage) {
  double block = static_cast<double>(t.engine.block_bytes);
  if (block > block_bytes_limit)
    throw config_error(std::string(block_keys) + ": " + time_limit_figure(block) +
                       " bytes per block is more than the " +
                       time_limit_figure(block_bytes_limit) + " (1 TiB) supported");
  double device = block * t.cache.device_blocks, host = block * t.cache.host_blocks;
  if (device > tier_bytes_limit)
    throw config_error("cache.device_tokens / cache.device_blocks x bytes per block (" +
                       std::string(block_keys) + "): a device tier of " +
                       time_limit_figure(device) + " bytes is more than the " +
                       time_limit_figure(tier_bytes_limit) + " (1 PiB) supported");
  if (host > tier_bytes_limit)
    throw config_error("cache.host_tokens / cache.host_blocks x bytes per block (" +
                       std::string(block_keys) + "): a host tier of " +
                       time_limit_figure(host) + " bytes is more than the " +
                       time_limit_figure(tier_bytes_limit) + " (1 PiB) supported");

  // The largest transfers: the whole device tier in or out, the whole host tier to or from
  // storage. Each must fit one op_time_limit_ns, so that no single timer is absurd.
  const link_options& l = t.engine.links;
  double layers = t.engine.layers;
  check_transfer("swapping in the whole device tier", device,
                 std::min(l.h2d_gbps, l.duplex_gbps), layers * l.h2d_layer_latency_ns,
                 "cache.device_* x bytes per block, links.h2d_gbps, links.duplex_gbps, "
                 "links.h2d_layer_latency_us");
  check_transfer("backing up the whole device tier", device, std::min(l.d2h_gbps, l.duplex_gbps),
                 l.d2h_latency_ns,
                 "cache.device_* x bytes per block, links.d2h_gbps, links.duplex_gbps, "
                 "links.d2h_latency_us");
  if (storage.capacity_blocks > 0) {
    check_transfer("moving the whole host tier over the network", host, l.nic_gbps,
                   l.nic_latency_ns, "cache.host_* x bytes per block, links.nic_gbps, "
                   "links.nic_latency_us");
    double nodes = std::max<uint32_t>(storage.nodes, 1);
    check_transfer("reading the whole host tier from storage", host / nodes, storage.read_gbps,
                   storage.read_latency_ns(),
                   "cache.host_* x bytes per block, storage.read_gbps, storage.nodes, "
                   "storage.read_op_latency_us (or storage.op_latency_us)");
    check_transfer("writing the whole host tier to storage", host / nodes, storage.write_gbps,
                   storage.op_latency_ns, "cache.host_* x bytes per block, storage.write_gbps, "
                   "storage.nodes, storage.op_latency_us");
  }

  // The longest step the cost model can give (model/scheduler/cost_model.hpp): a full token
  // budget of prefill attending to the whole device, every sequence decoding, every device token
  // read.
  const compute_profile& c = t.scheduler.compute;
  const scheduler_options& s = t.scheduler.options;
  double tokens = static_cast<double>(t.cache.device_blocks) * s.block_size;
  double budget = s.token_budget;
  double step = c.step_overhead_ns + c.prefill_token_ns * budget +
                c.prefill_attention_ns * budget * (tokens + budget) +
                c.decode_token_ns * s.max_num_seqs + c.decode_context_ns * tokens;
  if (c.model == compute_model::roofline) {
    batch_shape worst;
    worst.add_prefill(static_cast<uint64_t>(tokens), static_cast<uint64_t>(budget));
    for (uint32_t i = 0; i < s.max_num_seqs; ++i)
      worst.add_decode(static_cast<uint64_t>(tokens) / std::max<uint32_t>(s.max_num_seqs, 1));
    step = c.roofline.gpu.step_overhead_us * 1000.0 + roofline_of(c.roofline, worst).work_ns();
  }
  if (step > static_cast<double>(op_time_limit_ns))
    throw config_error(
      "compute.* x scheduler.token_budget, scheduler.max_num_seqs and cache.device_*: the "
      "longest step would take " + time_limit_days(step) + " of virtual time; one step may take at most " +
      time_limit_days(static_cast<double>(op_time_limit_ns)));
}

}  // namespace kvtier
