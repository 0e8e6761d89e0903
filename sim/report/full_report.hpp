#pragma once

// Outputs of `kvtier replay --mode full` (schema: docs/outputs.md): requests.csv with one row per
// request (times, cached tokens per tier, preemptions) and summary.json (latency percentiles,
// throughput, hits per tier, traffic per link, layer-wait stall, evictions, invariants).

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/full/full_replay.hpp"
#include "sim/report/hitrate_report.hpp"

namespace kvtier {

void write_full_csv(std::ostream& out, const full_result& r);

nlohmann::json full_summary(const full_result& r, const run_info& run,
                            const std::vector<trace_file_info>& files);

std::string full_text(const nlohmann::json& summary, const std::string& out_dir);

/// Nearest-rank percentile of `sorted` (p in [0, 100]); 0 when empty.
double percentile(const std::vector<double>& sorted, double p);

}  // namespace kvtier
