#pragma once

// The SLO capacity study (docs/sweep.md, "The SLO capacity study"): for each configuration of a
// sweep (each cell of its grid), the highest arrival rate at which TTFT p99 and TPOT p99 stay
// within slo.ttft_p99_ms and slo.tpot_p99_ms, searched by rate_search. The searches advance in
// rounds: each round replays every unfinished configuration at its next rate, in parallel, as
// cells of one sweep folder, so a stopped study resumes (finished replays are not run again)
// and results.csv holds every replay. slo.csv and slo.json hold one row per configuration.

#include <string>
#include <vector>

#include "sim/sweep/local_runner.hpp"
#include "sim/sweep/sweep_spec.hpp"

namespace kvtier {

struct slo_limits {
  double ttft_p99_ms = 0;
  double tpot_p99_ms = 0;
  double precision = 0;
};

/// One configuration's answer.
struct slo_capacity {
  std::vector<std::pair<std::string, std::string>> grid;  ///< axis -> label (traces first)
  std::string outcome;          ///< bracketed, never_met, always_met
  double sustained_rate = 0;    ///< x the recorded load (search_axis); 0: none met
  std::string searched_key;     ///< the axis searched: trace.time_scale or session_copies
  double time_scale = 0;        ///< at the sustained rate
  double session_copies = 0;    ///< at the sustained rate
  double failing_rate = 0;      ///< the lowest rate that failed (0: none)
  size_t iterations = 0;        ///< replays the search took
  std::string cell;             ///< the replay at the sustained rate (empty: none)
  double requests_per_s = 0;    ///< at the sustained rate: finished requests per second
  double ttft_p99_ms = 0;       ///< at the sustained rate
  double tpot_p99_ms = 0;
  double device_bytes = 0;      ///< bytes provisioned per tier (capacity x KV bytes per token)
  double host_bytes = 0;
  double storage_bytes = 0;
};

struct slo_study_result {
  slo_limits limits;
  std::vector<slo_capacity> rows;
  size_t replays = 0;
  size_t failed_replays = 0;  ///< replays that did not finish (count as not met)
};

/// Runs the study of `spec` (spec.search.enabled) in `dir` with workers as `run` says; writes
/// DIR/plan.json, cells, results.csv/json, slo.csv and slo.json.
slo_study_result run_slo_study(const std::string& dir, const sweep_spec& spec,
                               const local_run_options& run);

}  // namespace kvtier
