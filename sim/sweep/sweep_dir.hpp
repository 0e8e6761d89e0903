#pragma once

// A sweep's folder (schema: docs/outputs.md, "kvtier sweep"):
//   plan.json          every cell: id, grid values, effective config, traces, seed, mode
//   cells.txt          the cell ids, one per line (for job arrays and GNU parallel)
//   cells/<id>/        one cell's summary.json, requests.csv, cell.json (its status) and log.txt
//   results.csv/.json  one row per cell, results_long.csv one line per metric of a cell
//                      (written by collect; sim/sweep/results_tables.hpp)
// Every file is written atomically; a cell counts as done only once its cell.json says "ok".

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

struct collect_result {
  size_t ok = 0;
  size_t failed = 0;
  size_t missing = 0;
};

/// Merges the cells' summaries into results.csv, results_long.csv and results.json.
collect_result collect(const std::string& dir, const sweep_plan& plan);

}  // namespace kvtier
