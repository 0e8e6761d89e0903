#pragma once

// Small timed replays built in code: a config with round numbers and a handful of requests, so
// that expected times can be worked out by hand.

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "sim/full/full_replay.hpp"
#include "sim/full/preloaded_trace.hpp"

namespace kvtier::test {

/// The one instance of a plan, or its first.
inline instance_config& instance_of(deployment_plan& t) {
  return t.instances.front();
}
inline const instance_config& instance_of(const deployment_plan& t) {
  return t.instances.front();
}

/// One mixed instance of 16-token blocks, 4 layers, 64 bytes per token (1024 per block, 256 per
/// layer), links of 1 byte/ns with no latency, no overhead; capacities and costs to be set by
/// the test.
inline deployment_plan small_config(uint32_t device_blocks, uint32_t host_blocks) {
  instance_config t;
  t.cache.device_blocks = device_blocks;
  t.cache.host_blocks = host_blocks;
  t.cache.policy = write_policy::write_through;
  t.controller.block_size = 16;
  t.controller.layers = 4;
  t.controller.storage_namespace = 1;
  t.controller.check_every = 1;
  scheduler_options& so = t.scheduler.options;
  so.block_size = 16;
  so.max_num_seqs = 8;
  so.token_budget = 1000;
  so.reserve_output_blocks = 0;
  t.scheduler.compute.layers = 4;
  t.scheduler.device_blocks = device_blocks;
  t.scheduler.block_bytes = 1024;
  t.engine.layers = 4;
  t.engine.block_bytes = 1024;
  t.engine.links = {1, 1, 100, 0, 0, 1, 0};
  deployment_plan p;
  p.instances = {t};
  p.storage.pool.capacity_blocks = 0;
  return p;
}

/// A request arriving at `at_ns` whose prompt is the 16-token blocks `ids`.
inline trace_request request(uint64_t seq, int64_t at_ns, std::vector<uint64_t> ids,
                             uint32_t output) {
  trace_request r;
  r.seq = seq;
  r.arrival_ns = at_ns;
  r.ids = std::move(ids);
  r.trace_block_size = 16;
  r.id_space = 7;
  r.input_tokens = static_cast<uint32_t>(r.ids.size()) * 16;
  r.output_tokens = output;
  return r;
}

inline full_result run_scenario(const deployment_plan& config, std::vector<trace_request> requests,
                                const full_run_options& options = {}) {
  preloaded_trace t = preload(std::move(requests), 16);
  return run_full_replay(config, feed_of(t), options);
}

inline const request_record& record(const full_result& r, uint64_t seq) {
  for (const auto& x : r.scheduler.requests)
    if (x.req == seq)
      return x;
  throw std::runtime_error("no such request");
}

/// The run drained and the invariant checks ran and found nothing.
inline void require_clean(const full_result& r) {
  INFO((r.controller.invariant_messages.empty() ? std::string{}
                                                : r.controller.invariant_messages.front()));
  REQUIRE(r.controller.invariant_violations == 0);
  REQUIRE(r.controller.invariant_checked > 0);
  REQUIRE(r.drained);
}

}  // namespace kvtier::test
