#include "sim/report/summary_sections.hpp"

#include "sim/report/summary_math.hpp"

namespace kvtier {

using nlohmann::json;

namespace {

// One instance of a cluster: its requests' latency and hits, its own traffic and evictions.
json instance_summary(const instance_result& x) {
  std::vector<double> ttft, tpot;
  uint64_t finished = 0, input = 0;
  per_tier<uint64_t> tier_tokens{};
  for (const request_record& q : x.scheduler.requests) {
    if (q.finish_ns < 0)
      continue;
    ++finished;
    // Hits as the summary counts them (request_tally.cpp): at a request's first admission on its
    // first pass. A pass after a decode instance dropped it (PD) finds what its earlier passes
    // computed, and a readmission after a preemption its own blocks: neither is a cache hit.
    if (q.attempt == 0) {
      input += q.input_tokens;
      for (tier t : all_tiers)
        at(tier_tokens, t) += at(q.first_hit_tokens, t);
    }
    ttft.push_back(static_cast<double>(q.first_token_ns - q.arrival_ns) / 1e6);
    if (q.output_tokens > 1)
      tpot.push_back(static_cast<double>(q.finish_ns - q.first_token_ns) / 1e6
                     / static_cast<double>(q.output_tokens - 1));
  }
  json by_tier = json::object();
  for (tier t : all_tiers)
    by_tier[to_string(t)] = ratio(at(tier_tokens, t), input);
  const engine_report& e = x.engine;
  return {{"name", x.name},
          {"requests", {{"finished", finished}, {"rejected", x.scheduler.rejected}}},
          {"hit_ratio_tokens", by_tier},
          {"latency_ms", {{"ttft", distribution(ttft)}, {"tpot", distribution(tpot)}}},
          {"traffic", {{"h2d_bytes", at(e.bytes, transfer_kind::swap_in)},
                       {"d2h_bytes", d2h_bytes(e)},
                       {"storage_read_bytes", at(e.bytes, transfer_kind::load)},
                       {"storage_write_bytes", at(e.bytes, transfer_kind::store)}}},
          {"evictions", {{"device", x.controller.device_evictions},
                         {"host", x.controller.host_evictions}}},
          {"preemptions", x.scheduler.preemptions},
          {"steps", x.scheduler.steps},
          {"invariant_violations", x.controller.invariant_violations}};
}

}  // namespace

json instances_section(const full_result& r) {
  json per_instance = json::array();
  for (size_t i = 0; i < r.instances.size(); ++i) {
    per_instance.push_back(instance_summary(r.instances[i]));
    per_instance.back()["routed"] = r.front_end.per_instance[i];
    if (r.disaggregated)
      per_instance.back()["role"] = to_string(r.instances[i].role);
  }
  return per_instance;
}

}  // namespace kvtier
