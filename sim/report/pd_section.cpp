#include "sim/report/summary_sections.hpp"

#include <array>
#include <map>
#include <string>

#include "sim/report/summary_math.hpp"

namespace kvtier {

using nlohmann::json;

namespace {

// Later passes of a request a decode instance dropped re-prefill it: its first token came from
// the first pass, and its TPOT spans every pass (the joined records).
struct prefill_passes {
  std::vector<double> first_ttft;  ///< ms, first passes that gave a first token
  uint64_t reprefills = 0;
  uint64_t reprefilled_tokens = 0;  ///< computed by the later passes
  per_tier<uint64_t> restored{};  ///< found cached by the later passes, per tier
};

prefill_passes tally_prefill_passes(const full_result& r) {
  prefill_passes p;
  for (const instance_result& x : r.instances)
    for (const request_record& q : x.scheduler.requests) {
      if (x.role != pd_role::prefill)
        continue;
      if (q.attempt == 0) {
        if (q.first_token_ns >= 0)
          p.first_ttft.push_back(static_cast<double>(q.first_token_ns - q.arrival_ns) / 1e6);
        continue;
      }
      ++p.reprefills;
      p.reprefilled_tokens += q.computed_tokens;
      for (tier t : all_tiers)
        at(p.restored, t) += at(q.first_hit_tokens, t);
    }
  return p;
}

json decode_tpot(const scheduler_report& s) {
  std::vector<double> tpot;
  for (const request_record& q : s.requests)
    if (q.finish_ns >= 0 && q.output_tokens > 1)
      tpot.push_back(static_cast<double>(q.finish_ns - q.first_token_ns) / 1e6
                     / static_cast<double>(q.output_tokens - 1));
  return distribution(tpot);
}

json pd_bytes(const full_result& r) {
  uint64_t nic = 0, media_read = 0, media_written = 0;
  for (const link_report& l : r.engine.links)
    if (l.name == "nic")
      nic += l.bytes;
  for (const link_report& l : r.storage.nodes) {
    bool read = l.name.size() > 5 && l.name.compare(l.name.size() - 5, 5, ".read") == 0;
    (read ? media_read : media_written) += l.bytes;
  }
  return {{"pd_link", r.scheduler.pd_link_bytes}, {"nic", nic},
          {"storage_media_read", media_read}, {"storage_media_written", media_written}};
}

json decode_drops(const full_result& r, const prefill_passes& p) {
  const front_end_report& f = r.front_end;
  const scheduler_report& s = r.scheduler;
  return {
    {"dropped", s.decode_drops},
    {"rerouted", f.rerouted},
    {"saved", f.rerouted_saved},
    {"saved_blocks", s.decode_drop_write_blocks},
    {"write_timeouts", s.decode_drop_write_timeouts},
    {"write_wait_s", seconds6(s.decode_drop_write_wait_ns)},
    {"reprefills", p.reprefills},
    {"reprefill_computed_tokens", p.reprefilled_tokens},
    {"reprefill_restored_tokens",
     {{"device", at(p.restored, tier::device)}, {"host", at(p.restored, tier::host)},
      {"storage", at(p.restored, tier::storage)}}},
  };
}

}  // namespace

json pd_section(const full_result& r) {
  const front_end_report& f = r.front_end;
  const scheduler_report& s = r.scheduler;
  std::vector<double> handoff;
  for (int64_t ns : f.handoff_ns)
    handoff.push_back(static_cast<double>(ns) / 1e6);
  prefill_passes passes = tally_prefill_passes(r);
  // Requests that ended in error, by the code FastDeploy answers them with.
  std::map<std::string, uint64_t> codes{{"500", 0}, {"502", 0}};
  codes[std::to_string(handoff_error_code(r.pd_mode))] += f.handoff_failures - f.recomputed;
  codes[std::to_string(decode_resource_timeout_code)] += f.decode_resource_timeouts;
  json out = {
    {"transfer", to_string(r.pd_mode)},
    {"handoffs", f.handoff_ns.size() + f.handoff_failures},
    {"handoff_latency_ms", distribution(handoff)},
    {"preallocations", {{"granted", s.preallocations}, {"refused", f.preallocation_refusals}}},
    {"failures", {{"handoffs", f.handoff_failures},
                  {"errored", f.handoff_failures - f.recomputed},
                  {"recomputed", f.recomputed},
                  {"injected", f.injected_failures},
                  {"storage_read_failures", s.handoff_read_failures},
                  {"decode_resource_timeouts", f.decode_resource_timeouts},
                  {"error_codes", codes}}},
    {"blocks", {{"sent", s.handoff_blocks_sent}, {"skipped", s.handoff_blocks_skipped},
                {"storage_reads", s.handoff_reads}}},
    {"bytes", pd_bytes(r)},
    {"pd_link_busy_s", seconds6(s.pd_link_busy_ns)},
    {"latency_ms", {{"prefill", {{"ttft", distribution(passes.first_ttft)}}},
                    {"decode", {{"tpot", decode_tpot(s)}}}}},
  };
  // Only runs where a decode instance dropped a request carry the section.
  if (s.decode_drops > 0 || f.rerouted > 0)
    out["decode_drops"] = decode_drops(r, passes);
  return out;
}

}  // namespace kvtier
