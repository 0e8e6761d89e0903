#pragma once

// A sweep's folder (schema: docs/outputs.md, "kvtier sweep"):
//   plan.json          every cell: id, grid values, effective config, traces, seed, mode
//   cells.txt          the cell ids, one per line (for job arrays and GNU parallel)
//   cells/<id>/        one cell's summary.json, requests.csv, cell.json (its status) and log.txt
//   results.csv/.json  one row per cell, results_long.csv one line per metric of a cell
//                      (written by collect; sim/sweep/results_tables.hpp)
// Every file is written atomically; a cell counts as done only once its cell.json says "ok".

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/build_info.hpp"
#include "sim/sweep/sweep_spec.hpp"

namespace kvtier {

struct sweep_plan {
  std::vector<std::string> axes;  ///< grid column names, in order
  std::vector<sweep_cell> cells;
  std::string build = build_id();  ///< the kvtier build that made the plan (its cell ids too)
};

sweep_plan make_plan(const sweep_spec& spec);
void write_plan(const std::string& dir, const sweep_plan& plan);
/// Throws config_error when the folder holds no readable plan.
sweep_plan read_plan(const std::string& dir);

std::string cell_dir(const std::string& dir, const std::string& id);

/// What a cell's cell.json says; nullopt when it has none (never run, or killed midway).
std::optional<nlohmann::json> cell_status(const std::string& dir, const std::string& id);
bool cell_done(const std::string& dir, const std::string& id);

/// The warning for a folder whose plan another build made (its cells will not be reused: cell
/// ids name the build); nullopt when the folder has no plan or this build made it.
std::optional<std::string> plan_of_other_build(const std::string& dir);

/// Runs one cell of the plan in this process through the replay driver, writing its outputs
/// and cell.json; returns the exit code (0 ok, 1 failed replay, 2 bad input). Throws
/// config_error when another build made the plan: one sweep never mixes builds.
int run_cell(const std::string& dir, const sweep_plan& plan, const std::string& id);

/// Writes a failed cell.json for a cell whose worker ended without one (killed, crashed),
/// `how` saying how it ended ("killed by SIGKILL"), so that its row tells why.
void record_worker_end(const std::string& dir, const std::string& id, const std::string& how);

/// Writes a failed cell.json saying `error` for a cell that ended, or never ran, for a reason
/// outside it (its Slurm task cancelled, its node lost, its time limit), creating the cell's
/// folder if the cell never started. A `provisional` reason (a Slurm task that only knows it
/// was signalled) gives way to a better one (the task's end as Slurm names it).
void record_cell_failure(const std::string& dir, const std::string& id, const std::string& error,
                         bool provisional = false);

/// Forgets a cell's earlier status and log before it is run again (a retry), so that what it
/// leaves afterwards is this run's alone.
void clear_cell_status(const std::string& dir, const std::string& id);

struct collect_result {
  size_t ok = 0;
  size_t failed = 0;
  size_t missing = 0;
  /// Finished cells whose figures something besides the cache shaped (summary.json's "load"):
  /// overloaded, by cause (arrivals, clock_lag, l3_backpressure), and with clock lag or L3
  /// backpressure at all.
  size_t overloaded = 0;
  std::map<std::string, size_t> overload_causes;
  size_t clock_lag = 0;
  size_t l3_backpressure = 0;
};

/// The warning lines a sweep prints for `c` (none when no cell was shaped by its load).
std::vector<std::string> load_warnings(const collect_result& c, const std::string& dir);

/// Merges the cells' summaries into results.csv, results_long.csv and results.json. A cell with
/// no status gets the note `not_run[id]` as its error when there is one (where it is queued).
collect_result collect(const std::string& dir, const sweep_plan& plan,
                       const std::map<std::string, std::string>& not_run = {});

}  // namespace kvtier
