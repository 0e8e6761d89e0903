#pragma once

// The replay driver as a library call: a config and a trace list in, a result out. `kvtier
// replay` is a thin command over it; `kvtier sweep` runs one call per cell, and other front ends
// (the live server) reuse it the same way.
//
// Bad input (config, trace) throws config_error / trace_error before any output is touched; a
// replay that ran but failed (invariant violations, requests left unfinished) returns with
// `failed()` true and its outputs written, so that the failure can be studied.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/instance.hpp"
#include "sim/config/options.hpp"
#include "sim/trace/trace_reader.hpp"

namespace kvtier {

enum class replay_mode { full, hitrate };

struct replay_job {
  config cfg;                        ///< defaults, file and --set already applied
  std::vector<std::string> traces;   ///< at least one
  std::string format = "auto";
  replay_mode mode = replay_mode::full;
  bool wall_clock = false;           ///< full mode: wall clock instead of virtual time
  double speed = 1.0;                ///< wall clock: virtual seconds per wall second
  bool cuda = false;                 ///< full mode: the real GPU backend (wall clock)
  bool verify = false;               ///< cuda: check every block's bytes wherever it lands
  bool skip_bad_lines = false;
  uint64_t check_every = 0;          ///< invariant checks every N requests (hitrate) or commits
  bool deterministic = false;        ///< write wall-clock figures as 0
  uint64_t seed = 0;                 ///< draws the faults (faults.*, pd.failure_rate); nothing else is random
  std::string out_dir;               ///< summary.json and requests.csv; empty: write nothing
  bool progress = false;             ///< a progress bar on stderr (when it is a terminal)
  /// With skip_bad_lines: told of every skipped line.
  std::function<void(const trace_error&)> on_skip;
  /// Full mode, wall clock: the instance's cache controller is a live server's (engine-sim).
  controller_factory remote_controller;
  /// With remote_controller: the GPU the step compute runs on (engine-sim --backend cuda).
  std::shared_ptr<compute_device> remote_compute;
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

/// Runs one replay; writes its outputs to job.out_dir when one is named.
replay_result run_replay_job(const replay_job& job);

}  // namespace kvtier
