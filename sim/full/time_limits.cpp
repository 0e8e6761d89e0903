#include "sim/full/time_limits.hpp"

#include <algorithm>
#include <cstdio>

#include "core/time_math.hpp"

namespace kvtier {

namespace {

std::string figure(double x) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", x);
  return buf;
}

std::string days(double ns) {
  return figure(ns / 86400e9) + " days";
}

const char* const block_keys =
  "model.layers x model.kv_heads x model.head_dim x model.kv_dtype x cache.block_size";

// Moving `bytes` over a link of `gbps` (1 GB/s is one byte per ns), plus `latency_ns`.
void check_transfer(const char* what, double bytes, double gbps, double latency_ns,
                    const char* keys) {
  double ns = bytes / gbps + latency_ns;
  if (ns > static_cast<double>(op_time_limit_ns))
    throw config_error(std::string(keys) + ": " + what + " would take " + days(ns) +
                       " of virtual time; one transfer may take at most " +
                       days(static_cast<double>(op_time_limit_ns)));
}

}  // namespace

void check_time_limits(const timed_config& t) {
  double block = static_cast<double>(t.block_bytes);
  if (block > block_bytes_limit)
    throw config_error(std::string(block_keys) + ": " + figure(block) +
                       " bytes per block is more than the " + figure(block_bytes_limit) +
                       " (1 TiB) supported");
  double device = block * t.cache.device_blocks, host = block * t.cache.host_blocks;
  if (device > tier_bytes_limit)
    throw config_error("cache.device_tokens / cache.device_blocks x bytes per block (" +
                       std::string(block_keys) + "): a device tier of " + figure(device) +
                       " bytes is more than the " + figure(tier_bytes_limit) + " (1 PiB) supported");
  if (host > tier_bytes_limit)
    throw config_error("cache.host_tokens / cache.host_blocks x bytes per block (" +
                       std::string(block_keys) + "): a host tier of " + figure(host) +
                       " bytes is more than the " + figure(tier_bytes_limit) + " (1 PiB) supported");

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
  if (t.storage.capacity_blocks > 0) {
    check_transfer("moving the whole host tier over the network", host, l.nic_gbps,
                   l.nic_latency_ns, "cache.host_* x bytes per block, links.nic_gbps, "
                   "links.nic_latency_us");
    double nodes = std::max<uint32_t>(t.storage.nodes, 1);
    check_transfer("reading the whole host tier from storage", host / nodes, t.storage.read_gbps,
                   t.storage.read_latency_ns(),
                   "cache.host_* x bytes per block, storage.read_gbps, storage.nodes, "
                   "storage.read_op_latency_us (or storage.op_latency_us)");
    check_transfer("writing the whole host tier to storage", host / nodes, t.storage.write_gbps,
                   t.storage.op_latency_ns, "cache.host_* x bytes per block, storage.write_gbps, "
                   "storage.nodes, storage.op_latency_us");
  }

  // The longest step the cost model can give (actors/scheduler/cost_model.hpp): a full token
  // budget of prefill attending to the whole device, every sequence decoding, every device token
  // read.
  const compute_profile& c = t.scheduler.compute;
  const scheduler_options& s = t.scheduler.options;
  double tokens = static_cast<double>(t.cache.device_blocks) * s.block_size;
  double budget = s.token_budget;
  double step = c.step_overhead_ns + c.prefill_token_ns * budget +
                c.prefill_attention_ns * budget * (tokens + budget) +
                c.decode_token_ns * s.max_num_seqs + c.decode_context_ns * tokens;
  if (step > static_cast<double>(op_time_limit_ns))
    throw config_error(
      "compute.* x scheduler.token_budget, scheduler.max_num_seqs and cache.device_*: the "
      "longest step would take " + days(step) + " of virtual time; one step may take at most " +
      days(static_cast<double>(op_time_limit_ns)));
}

namespace {

// The field a format records a request's time in.
const char* time_field(trace_format format, bool think) {
  switch (format) {
    case trace_format::mooncake: return "timestamp";
    case trace_format::azure: return "TIMESTAMP";
    case trace_format::agentic: return think ? "think_time" : "t";
    case trace_format::native: return think ? "think_time_s" : "arrival_s";
    case trace_format::detect: break;
  }
  return think ? "think time" : "arrival";
}

}  // namespace

void check_request_times(const trace_request& r, double time_scale, const std::string& path,
                         trace_format format) {
  auto check = [&](int64_t ns, const char* field, const char* what) {
    double scaled = static_cast<double>(ns) * time_scale;
    if (scaled > static_cast<double>(input_time_limit_ns))
      throw trace_error(path, r.line, field,
                        std::string(what) + " of " + figure(static_cast<double>(ns) / 1e9) +
                        " s times trace.time_scale " + figure(time_scale) + " is " +
                        days(scaled) + ", beyond the " +
                        days(static_cast<double>(input_time_limit_ns)) + " a trace may span");
  };
  if (r.follows_previous)
    check(r.think_ns, time_field(format, true), "a think time");
  else
    check(r.arrival_ns, time_field(format, false), "an arrival");
}

void check_virtual_time(const full_result& r) {
  bool reached = r.last_event_ns >= time_limit_ns;
  for (const request_record& x : r.scheduler.requests)
    reached = reached || x.finish_ns >= time_limit_ns || x.first_token_ns >= time_limit_ns;
  if (reached)
    throw config_error(
      "virtual time reached its limit of " + days(static_cast<double>(time_limit_ns)) +
      ": the trace's times (x trace.time_scale, session think times add up turn after turn) and "
      "the step and transfer times of compute.*, links.* and storage.* are too long together");
}

}  // namespace kvtier
