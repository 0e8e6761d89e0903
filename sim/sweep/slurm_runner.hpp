#pragma once

// Runs a planned sweep's cells on a Slurm cluster (docs/sweep.md, "On a Slurm cluster"): the
// cells still to run are cut into batches of `cells_per_task`, one batch per task of one job
// array (sbatch), so that a plan of thousands of short cells stays within the cluster's
// MaxArraySize; the runner waits for the array (squeue) and leaves collecting to the caller.
// Each task is the same binary run as `kvtier sweep --out DIR --task-file F --task N`, which
// runs its batch through the local runner (one worker per cell, finished cells skipped).
// Finished cells are never submitted; failed ones only with `retry_failed`.

#include <cstddef>
#include <string>
#include <vector>

#include "sim/sweep/sweep_dir.hpp"

namespace kvtier {

struct slurm_run_options {
  std::string self;  ///< this binary's absolute path, as every node sees it
  size_t cells_per_task = 4;
  bool retry_failed = false;
  std::vector<std::string> sbatch_args;  ///< passed to sbatch as given (--partition=..., ...)
  bool progress = true;
  double poll_s = 2;
};

struct slurm_run_result {
  size_t skipped = 0;         ///< done before this run
  size_t failed_kept = 0;     ///< failed before and not resubmitted (no retry_failed)
  size_t submitted = 0;       ///< cells in the array
  size_t tasks = 0;
  std::string job_id;         ///< empty when nothing was submitted
  double wall_s = 0;
};

slurm_run_result run_slurm(const std::string& dir, const sweep_plan& plan,
                           const slurm_run_options& options);

/// A task's entry: runs the cells on line `task` (from 0) of `task_file` with `jobs` workers.
/// Returns 0 when every one of them is done, 1 otherwise.
int run_slurm_task(const std::string& dir, const sweep_plan& plan, const std::string& task_file,
                   size_t task, size_t jobs);

/// The absolute path of this process's binary (for scripts other machines run).
std::string self_executable_path();

}  // namespace kvtier
