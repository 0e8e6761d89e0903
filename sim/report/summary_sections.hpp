#pragma once

// One builder per top-level object of a full replay's summary.json (docs/outputs.md, `--mode
// full`); full_summary (full_report.cpp) puts them together under their keys.

#include <vector>

#include <nlohmann/json.hpp>

#include "sim/report/full_result.hpp"
#include "sim/report/hitrate_report.hpp"
#include "sim/report/request_tally.hpp"

namespace kvtier {

// Requests and what the cache saved them (request_sections.cpp).
nlohmann::json trace_section(const full_result& r, const run_info& run,
                             const std::vector<trace_file_info>& files);
nlohmann::json requests_section(const full_result& r, const request_tally& t);
nlohmann::json hit_ratio_section(const request_tally& t);
nlohmann::json hits_section(const request_tally& t);
nlohmann::json readmission_hits_section(const request_tally& t);
nlohmann::json latency_section(const request_tally& t);
nlohmann::json throughput_section(const request_tally& t);

// The scheduler's and the controller's decisions (decision_sections.cpp).
nlohmann::json preemption_section(const full_result& r, const run_info& run,
                                  const request_tally& t);
nlohmann::json prefetch_section(const full_result& r, const run_info& run);
nlohmann::json steps_section(const scheduler_report& s);
nlohmann::json transfers_section(const controller_report& c);
nlohmann::json evictions_section(const full_result& r);
nlohmann::json invariants_section(const controller_report& c);

// Bytes moved and the storage pool (traffic_sections.cpp).
nlohmann::json traffic_section(const full_result& r);
nlohmann::json storage_section(const full_result& r, const request_tally& t);

/// How the replay ran: virtual time, messages, clock lag (traffic_sections.cpp).
nlohmann::json simulation_section(const full_result& r, const run_info& run);

/// PD: the handoffs, their latency, failures and bytes per link, latency per role (pd_section.cpp).
nlohmann::json pd_section(const full_result& r);

/// A cluster: each instance's requests, hits, latency, traffic and evictions
/// (instances_section.cpp).
nlohmann::json instances_section(const full_result& r);

}  // namespace kvtier
