#pragma once

// Runs a planned sweep's cells on a Slurm cluster (docs/sweep.md, "On a Slurm cluster"): the
// cells still to run are cut into batches of `cells_per_task`, one batch per task of one job
// array (sbatch), so that a plan of thousands of short cells stays within the cluster's
// MaxArraySize; the runner waits for the array (squeue) and leaves collecting to the caller.
// Each task is the same binary run as `kvtier sweep --out DIR --task-file F --task N --jobs J`,
// which runs its batch through the local runner, J cells at once.
//
// Every array is recorded in DIR/slurm (tasks-N.txt, its batches; tasks-N.job, its job id), so
// that the runner survives what happens to the array and to itself:
// - a cell whose task is still queued or running is never submitted again: a runner that was
//   killed and run again waits for the arrays it finds alive (squeue) instead;
// - a cell whose task ended without a result of its own (scancel, a lost node, a time limit) is
//   recorded failed with how the task ended (squeue, or sacct once slurmctld forgot the job);
// - finished cells are never submitted; failed ones only with `retry_failed`.

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "sim/sweep/sweep_dir.hpp"

namespace kvtier {

struct slurm_run_options {
  std::string self;  ///< this binary's absolute path, as every node sees it
  size_t cells_per_task = 4;
  size_t jobs = 1;                   ///< cells at once within each task
  double cell_time_limit_s = 0;      ///< 0: none; else killed past it, and the task's --time
  bool retry_failed = false;
  std::vector<std::string> sbatch_args;  ///< passed to sbatch as given (--partition=..., ...)
  bool progress = true;
  double poll_s = 2;
};

struct slurm_run_result {
  size_t skipped = 0;         ///< done before this run
  size_t failed_kept = 0;     ///< failed before and not resubmitted (no retry_failed)
  size_t adopted = 0;         ///< queued or running in an earlier array: waited for, not resubmitted
  size_t submitted = 0;       ///< cells in the new array
  size_t tasks = 0;
  size_t settled = 0;         ///< cells whose task ended without their result (recorded failed)
  std::string job_id;         ///< the new array's; empty when nothing was submitted
  std::vector<std::string> waited_for;  ///< earlier arrays still alive when this run began
  double wall_s = 0;
};

slurm_run_result run_slurm(const std::string& dir, const sweep_plan& plan,
                           const slurm_run_options& options);

/// Where each cell of the plan that has no status yet stands in the folder's Slurm arrays
/// ("queued in Slurm job 12, task 3 (PENDING)"), for --collect's rows; empty without arrays.
std::map<std::string, std::string> slurm_cell_notes(const std::string& dir,
                                                    const sweep_plan& plan);

/// A task's entry: runs the cells on line `task` (from 0) of `task_file`, `jobs` at once.
/// Returns 0 when every one of them is done, 1 otherwise.
int run_slurm_task(const std::string& dir, const sweep_plan& plan, const std::string& task_file,
                   size_t task, size_t jobs, double cell_time_limit_s, bool progress);

/// The absolute path of this process's binary (for scripts other machines run).
std::string self_executable_path();

}  // namespace kvtier
