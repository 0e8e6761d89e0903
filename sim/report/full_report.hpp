#pragma once

// Outputs of `kvtier replay --mode full` (schema: docs/outputs.md): requests.csv with one row per
// request (times, cached tokens per tier, preemptions) and summary.json (latency percentiles,
// throughput, hits per tier, traffic per link, layer-wait stall, evictions, invariants).

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/report/full_result.hpp"
#include "sim/report/hitrate_report.hpp"
#include "sim/report/summary_math.hpp"

namespace kvtier {

void write_full_csv(std::ostream& out, const full_result& r);

/// summary.json: one object per section (summary_sections.hpp), in one pass over the requests.
nlohmann::json full_summary(const full_result& r, const run_info& run,
                            const std::vector<trace_file_info>& files);

/// `timeseries`: the run also writes timeseries.csv (output.timeseries), named with the outputs.
std::string full_text(const nlohmann::json& summary, const std::string& out_dir,
                      bool timeseries = false);

}  // namespace kvtier
