#pragma once

// The replay driver as a library call: a config and a trace list in, a result out. `kvtier
// replay` is a thin command over it; `kvtier sweep` runs one call per cell, and `kvtier
// engine-sim` runs one with a remote controller. `kvtier serve` does not use it: it spawns the
// same deployment plan with an engine scheduling (serve/server/server.cpp).
//
// Bad input (config, trace) throws config_error / trace_error before any output is touched; a
// replay that ran but failed (invariant violations, requests left unfinished) returns with
// `failed()` true and its outputs written, so that the failure can be studied.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/run_modes.hpp"
#include "runtime/config/options.hpp"
#include "runtime/config/deployment_plan.hpp"
#include "sim/trace/trace_reader.hpp"

namespace kvtier {

/// The run's choices (mode, clock, backend, verify, check_every, seed, a remote controller: the
/// deployment plan's, runtime/config/deployment_plan.hpp), and what the job reads and writes. The seed
/// draws the faults (faults.*, pd.failure_rate) and the workload variant (trace.sample_fraction,
/// arrival_jitter_s, session_shift_s); nothing else is random.
struct replay_job : run_choices {
  config cfg;                        ///< defaults, file and --set already applied
  std::vector<std::string> traces;   ///< at least one
  std::string format = "auto";
  double speed = 1.0;                ///< wall clock: virtual seconds per wall second
  bool skip_bad_lines = false;
  bool deterministic = false;        ///< write wall-clock figures as 0
  std::string out_dir;               ///< summary.json and requests.csv; empty: write nothing
  bool progress = false;             ///< a progress bar on stderr (when it is a terminal)
  /// Full mode, wall clock: called about every 5 ms with the replay's virtual time
  /// (full_run_options::on_poll).
  std::function<void(int64_t virtual_now_ns)> on_poll;
  /// With skip_bad_lines: told of every skipped line.
  std::function<void(const trace_error&)> on_skip;
};

struct replay_result {
  nlohmann::json summary;            ///< what summary.json holds (schema: docs/outputs.md)
  std::string text;                  ///< a few readable lines for a terminal
  uint64_t invariant_violations = 0;
  std::string first_violation;
  bool drained = true;               ///< full mode: every request finished
  /// Things the user should know that do not fail the run (e.g. the wall clock fell behind).
  std::vector<std::string> warnings;

  bool failed() const { return invariant_violations > 0 || !drained; }
};

/// Runs one replay: resolves its deployment plan once, then replays; writes its outputs to
/// job.out_dir when one is named.
replay_result run_replay_job(const replay_job& job);

/// What a replay's seed draws under `cfg`: "" when nothing (no fault, no workload variant), else
/// the keys it draws for, e.g. "faults.*, trace.*" (for the warning that seeds change nothing).
std::string seeded_draws(const config& cfg);

}  // namespace kvtier
