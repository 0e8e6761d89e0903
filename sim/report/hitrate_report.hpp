#pragma once

// Outputs of `kvtier replay --mode hitrate` (schema: docs/outputs.md):
//  requests.csv  one row per request, written as the replay goes (atomically committed at the end)
//  summary.json  totals, hit ratios per tier, evictions, transfers, invariants, effective config

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/trace_request.hpp"
#include "sim/hitrate/hitrate_replay.hpp"
#include "sim/trace/trace_totals.hpp"

namespace kvtier {

/// One trace file as the summary reports it.
struct trace_file_info {
  std::string path;
  std::string format;
  uint64_t requests = 0;
  uint64_t skipped_lines = 0;
};

void write_hitrate_csv_header(std::ostream& out);
/// `time_scale` (trace.time_scale) stretches the recorded arrival, as the full replay's does.
void write_hitrate_csv_row(std::ostream& out, const trace_request& r, const request_outcome& o,
                           double time_scale);

struct run_info {
  std::vector<trace_file_info> files;
  nlohmann::json config;  ///< the effective config
  nlohmann::json model;   ///< the model's derived figures (runtime/config/compute_config.hpp)
  double parse_s = 0;     ///< wall time spent reading traces (not deterministic)
  double wall_s = 0;      ///< wall time of the whole replay (not deterministic)
  bool deterministic = false;  ///< write wall-clock figures as 0
  trace_totals trace;          ///< full mode
  uint64_t block_bytes = 0;    ///< full mode: bytes of one cache block (all layers, K and V)
};

nlohmann::json hitrate_summary(const hitrate_replay& replay, const run_info& run);

/// A few readable lines for the terminal.
std::string hitrate_text(const nlohmann::json& summary, const std::string& out_dir);

/// A ratio rounded to 6 decimals (0 when the denominator is 0).
double ratio(uint64_t part, uint64_t whole);

}  // namespace kvtier
