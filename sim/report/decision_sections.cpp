#include "sim/report/summary_sections.hpp"

#include <string>

#include "runtime/config/keys.hpp"
#include "sim/report/summary_math.hpp"

namespace kvtier {

using nlohmann::json;

namespace {

// A text key of the effective config ("" where the config given has none).
std::string config_text(const json& config, text_key key) {
  const std::string name = key.name;
  const size_t dot = name.find('.');
  const std::string section = name.substr(0, dot), field = name.substr(dot + 1);
  if (!config.is_object() || !config.contains(section) || !config[section].is_object())
    return "";
  const json& s = config[section];
  return s.contains(field) && s[field].is_string() ? s[field].get<std::string>() : "";
}

}  // namespace

json preemption_section(const full_result& r, const run_info& run, const request_tally& t) {
  const scheduler_report& s = r.scheduler;
  const preemption_io& p = r.controller.preemption;
  return {
    {"mode", config_text(run.config, keys::scheduler::preemption)},
    {"count", s.preemptions},
    {"requests", t.preempted_ttft.size()},
    {"recomputed_tokens", s.recomputed_tokens},
    {"restored_tokens", {{"device", at(s.restored_tokens, tier::device)},
                         {"host", at(s.restored_tokens, tier::host)},
                         {"storage", at(s.restored_tokens, tier::storage)}}},
    {"saved_blocks", p.saved_blocks},
    {"unsaved_blocks", p.unsaved_blocks},
    {"named_blocks", p.named_blocks},
    {"d2h_bytes", p.d2h_blocks * run.block_bytes},
    {"storage_write_bytes", p.stored_blocks * run.block_bytes},
    {"readmission_lookups", p.readmission_lookups},
    {"marginal_d2h_bytes", p.marginal_d2h_blocks * run.block_bytes},
    {"marginal_storage_write_bytes", p.marginal_stored_blocks * run.block_bytes},
    {"latency_ms", {{"preempted", {{"ttft", distribution(t.preempted_ttft)},
                                   {"e2e", distribution(t.preempted_e2e)}}},
                    {"not_preempted", {{"ttft", distribution(t.other_ttft)},
                                       {"e2e", distribution(t.other_e2e)}}}}},
  };
}

json prefetch_section(const full_result& r, const run_info& run) {
  const auto& p = r.controller.prefetch;
  return {
    {"policy", config_text(run.config, keys::storage::prefetch_policy)},
    {"started", p.started},
    {"below_threshold", p.below_threshold},
    {"ready_early", p.ready_early},
    {"timeouts", p.timeouts},
    {"protected_holds", p.protected_holds},
    {"protected_released", p.protected_released},
    {"wasted_blocks", p.wasted_blocks},
    {"wasted_bytes", p.wasted_blocks * run.block_bytes},
    {"admission_lookups", p.admission_lookups},
  };
}

json steps_section(const scheduler_report& s) {
  return {{"count", s.steps}, {"probes", s.probes},
          {"refused_admissions", s.refused_admissions}, {"busy_s", seconds6(s.busy_ns)},
          {"layer_wait_s", seconds6(s.layer_wait_ns)},
          {"reuse_wait_s", seconds6(s.reuse_wait_ns)},
          {"prefill_tokens", s.prefill_tokens}, {"decode_tokens", s.decode_tokens}};
}

json transfers_section(const controller_report& c) {
  return {{"swap_ins", c.swap_ins}, {"backups", c.backups},
          {"backups_skipped", c.backups_skipped}, {"write_backs", c.write_backs},
          {"storage_loads", c.loads}, {"storage_stores", c.stores},
          {"failed_loads", c.failed_loads}, {"batches", c.transfers}};
}

json evictions_section(const full_result& r) {
  return {{"device", r.controller.device_evictions}, {"host", r.controller.host_evictions},
          {"storage", r.storage.evictions}};
}

json invariants_section(const controller_report& c) {
  return {{"checked", c.invariant_checked}, {"violations", c.invariant_violations},
          {"messages", c.invariant_messages}};
}

}  // namespace kvtier
