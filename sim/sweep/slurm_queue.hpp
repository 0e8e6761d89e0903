#pragma once

// What the Slurm runner asks of Slurm (docs/sweep.md, "On a Slurm cluster"), through its
// commands: sbatch to submit a job array, squeue for the state of each of its tasks while
// slurmctld remembers the job (MinJobAge after it ends), sacct once it does not (where the cluster
// keeps accounting), scontrol for MaxArraySize. A command that fails for a reason other than an
// unknown job is an error, never read as "the job has ended".

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kvtier {

/// One array task's state as Slurm names it (PENDING, RUNNING, COMPLETED, CANCELLED, NODE_FAIL,
/// TIMEOUT, FAILED, OUT_OF_MEMORY, ...) and its reason (squeue's %r, e.g. NodeDown), if any.
struct slurm_task_state {
  std::string state;
  std::string reason;
};

/// Whether a task in this state is still queued or running (it will still run its cells).
bool slurm_task_live(const std::string& state);

/// The states of an array's tasks by task id: from squeue while slurmctld knows the job, else
/// from sacct; nullopt when neither knows it (purged, and no accounting). Throws
/// std::runtime_error when squeue fails otherwise (slurmctld unreachable).
std::optional<std::map<size_t, slurm_task_state>> slurm_array_states(const std::string& job_id);

/// Parses squeue's "%i|%T|%r" lines (or sacct's "JobID|State|..." lines) of array `job_id`:
/// "12_3|RUNNING|None", "12_[4-7,9%2]|PENDING|Resources", "12_5|CANCELLED by 0". Exposed
/// for its test.
std::map<size_t, slurm_task_state> parse_array_states(const std::string& job_id,
                                                      const std::string& text);

/// The live jobs named kvtier-sweep, by their comment (the task file they run): for a runner
/// that died before it recorded a job id.
std::map<std::string, std::string> slurm_live_sweeps();

struct slurm_submission {
  std::string task_file;  ///< absolute; its lines are the tasks
  size_t tasks = 0;
  std::string command;    ///< what each task runs ($SLURM_ARRAY_TASK_ID expands)
  std::string log_pattern;
  std::vector<std::string> sbatch_args;
};

/// Submits the array (sbatch --parsable --no-requeue unless the args ask to requeue); returns
/// its job id. Throws std::runtime_error with sbatch's words when it refuses.
std::string slurm_submit(const slurm_submission& s);

/// The cluster's MaxArraySize (Slurm's default, 1001, when its configuration does not say).
size_t slurm_max_array_size();

/// The text of a shell word that stays one word whatever it holds.
std::string shell_quote(const std::string& s);

}  // namespace kvtier
