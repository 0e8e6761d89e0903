#pragma once

// Runs a planned sweep's cells on this machine, each in its own worker process: the same
// binary invoked as `kvtier sweep --cell ID --out DIR`, the entry a job array or GNU parallel
// uses, so that local and distributed sweeps share one code path. A worker's output goes to the
// cell's log.txt. Cells already done are skipped (resume); a failed or killed cell is reported
// and the others go on, a killed one with a row saying how it ended. Workers die with the
// process that started them (docs/sweep.md, "Workers"). A worker that outlives the per-cell time
// limit is killed and its row says so. Stopped by SIGTERM or SIGINT (Ctrl-C, scancel, a Slurm
// time limit), the runner stops its workers and records why for each cell it had started (and,
// as a Slurm task, for each it had not yet), then ends by that signal. Progress goes to stderr.

#include <cstddef>
#include <string>

#include "sim/sweep/sweep_dir.hpp"

namespace kvtier {

struct local_run_options {
  std::string self;  ///< this binary's path
  size_t jobs = 1;
  bool progress = true;
  double cell_time_limit_s = 0;  ///< 0: none
  /// Who runs these cells, for the rows of cells a stop interrupts ("Slurm job 12 task 3");
  /// when set, cells not yet started are recorded too (their task will not come back to them).
  std::string stopped_as;
};

struct local_run_result {
  size_t skipped = 0;  ///< done before this run
  size_t ran = 0;
  size_t failed = 0;
  size_t most_running = 0;  ///< the most workers that ran at once
  double wall_s = 0;
};

local_run_result run_local(const std::string& dir, const sweep_plan& plan,
                           const local_run_options& options);

/// This process's executable, for spawning workers (/proc/self/exe).
std::string self_executable();

}  // namespace kvtier
