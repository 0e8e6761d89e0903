#include <iostream>
#include <thread>

#include "app/commands.hpp"
#include "app/load_config.hpp"
#include "sim/driver/replay_driver.hpp"
#include "sim/report/atomic_file.hpp"
#include "sim/sweep/folder_lock.hpp"
#include "sim/sweep/local_runner.hpp"
#include "sim/sweep/slurm_runner.hpp"
#include "sim/sweep/sweep_dir.hpp"

namespace kvtier {

CLI::App* add_sweep_command(CLI::App& app, sweep_args& args) {
  auto* cmd = app.add_subcommand(
    "sweep", "Replay a grid of configurations (cells) in parallel worker processes and merge "
             "their summaries into results.csv (docs/sweep.md)");
  add_config_options(*cmd, args.config);
  cmd->add_option("--trace", args.traces,
                  "trace file (repeatable; merged into one trace set). Default: the sweep file's, "
                  "else the bundled sample in the sample scenario (configs/sample.json), as "
                  "kvtier replay with no trace");
  cmd->add_option("--grid", args.grids,
                  "an axis: key=value1,value2,... (repeatable; the grid is every combination)");
  cmd->add_option("--seeds", args.seeds, "seeds, comma separated (each one a cell)");
  cmd->add_option("--file", args.file, "a JSON sweep file (docs/sweep.md); options add to it");
  cmd->add_option("--mode", args.mode, "full or hitrate (default: the file's, else full)")
    ->check(CLI::IsMember({"full", "hitrate"}));
  cmd->add_option("--format", args.format, "trace format")
    ->check(CLI::IsMember({"auto", "mooncake", "azure", "agentic", "native"}));
  cmd->add_option("--out", args.out_dir, "the sweep's folder")->capture_default_str();
  cmd->add_option("--jobs", args.jobs,
                  "cells at once: worker processes here (default: the core count), or in each "
                  "Slurm array task (default 1; the task asks for as many CPUs)");
  cmd->add_option("--cell-time-limit", args.cell_time_limit_s,
                  "seconds a cell may run before it is killed and counted failed (default: no "
                  "limit); with --runner slurm it also sets each task's --time unless "
                  "--sbatch gives one")
    ->check(CLI::PositiveNumber);
  cmd->add_flag("--plan", args.plan_only,
                "write plan.json and cells.txt, run nothing (for job arrays, GNU parallel)");
  cmd->add_option("--cell", args.cell, "run one cell of the plan in --out (a worker's entry)");
  cmd->add_flag("--collect", args.collect_only, "merge the cells in --out into results.csv/json");
  cmd->add_flag("--deterministic",
                args.deterministic, "write wall-clock figures as 0 (byte-identical results)");
  cmd->add_flag("--quiet", args.quiet, "no progress lines");
  cmd->add_option("--runner", args.runner,
                  "local (worker processes here) or slurm (a job array; docs/sweep.md)")
    ->check(CLI::IsMember({"local", "slurm"}))->capture_default_str();
  cmd->add_option("--cells-per-task", args.cells_per_task,
                  "slurm: cells per array task (raised to keep the array within MaxArraySize)")
    ->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_flag("--retry-failed", args.retry_failed,
                "slurm: resubmit the cells that failed before, those of a cancelled or lost "
                "task too (by default they stay failed, their rows saying why)");
  cmd->add_option("--sbatch", args.sbatch_args,
                  "slurm: an sbatch option, e.g. --sbatch=--partition=cpu (repeatable)")
    ->allow_extra_args(false);
  cmd->add_option("--task-file", args.task_file,
                  "a Slurm array task's entry: the file of batches (one line per task)");
  cmd->add_option("--task", args.task, "with --task-file: this task's line, from 0");
  return cmd;
}

sweep_spec sweep_spec_of(const sweep_args& args) {
  sweep_spec spec;
  if (!args.file.empty())
    spec = read_sweep_file(args.file);
  if (spec.search.enabled)
    throw config_error(args.file + ": a sweep file with a \"search\" is an SLO study: run it "
                       "with kvtier study (docs/sweep.md, \"The SLO capacity study\")");
  if (!args.config.config_file.empty())
    spec.config_file = args.config.config_file;
  for (const auto& s : args.config.sets)
    spec.sets.push_back(s);
  if (!args.traces.empty())
    spec.trace_sets = {{"traces", args.traces}};
  if (spec.trace_sets.empty()) {
    spec.trace_sets = {{"sample", {default_trace_path()}}};
    spec.base_sets = sample_defaults();
  }
  for (const auto& g : args.grids)
    spec.axes.push_back(parse_grid_option(g));
  if (!args.seeds.empty())
    spec.seeds = parse_seeds(args.seeds);
  if (!args.mode.empty())
    spec.mode = args.mode;
  if (!args.format.empty())
    spec.format = args.format;
  spec.deterministic = args.deterministic;
  return spec;
}

// Seeds draw faults and workload variants only; several seeds over cells that configure neither
// are the same replay several times (docs/sweep.md, "Cells").
void warn_if_seeds_change_nothing(const sweep_spec& spec, const sweep_plan& plan) {
  if (spec.seeds.size() < 2)
    return;
  for (const auto& cell : plan.cells) {
    config cfg;
    cfg.merge_json(cell.config, "cell " + cell.id);
    if (!seeded_draws(cfg).empty())
      return;
  }
  std::cerr << "sweep: WARNING: --seeds gives " << spec.seeds.size()
            << " replicates that change nothing: no cell configures a fault (faults.*, "
               "pd.failure_rate) or a workload variant (trace.sample_fraction, "
               "trace.arrival_jitter_s, trace.session_shift_s), so every seed replays the same "
               "workload to the same rows\n";
}

// Overload, clock lag and L3 backpressure shape a cell's figures besides the cache: said once
// for the sweep, whether or not --quiet (docs/sweep.md, "Reports").
void warn_about_load(const collect_result& c, const std::string& dir) {
  for (const auto& line : load_warnings(c, dir))
    std::cerr << "sweep: WARNING: " << line << '\n';
}

enum class sweep_runner { local, slurm };

int run_on_slurm(const std::string& dir, const sweep_plan& plan, const sweep_args& args) {
  slurm_run_options options;
  options.self = self_executable_path();
  options.cells_per_task = args.cells_per_task;
  options.jobs = args.jobs > 0 ? args.jobs : 1;
  options.cell_time_limit_s = args.cell_time_limit_s;
  options.retry_failed = args.retry_failed;
  options.sbatch_args = args.sbatch_args;
  options.progress = !args.quiet;
  slurm_run_result r = run_slurm(dir, plan, options);
  collect_result c = collect(dir, plan);
  warn_about_load(c, dir);
  if (!args.quiet) {
    std::cout << "sweep: " << plan.cells.size() << " cells (" << r.skipped << " already done, "
              << r.submitted << " run in " << r.tasks << " Slurm tasks";
    if (!r.job_id.empty())
      std::cout << " of job " << r.job_id;
    if (r.adopted > 0)
      std::cout << ", " << r.adopted << " waited for in earlier job(s)";
    std::cout << ", " << c.failed + c.missing << " failed";
    if (r.settled > 0)
      std::cout << " (" << r.settled << " whose Slurm task ended without them: cancelled, a lost "
                   "node or a time limit; their rows say which)";
    if (r.failed_kept > 0)
      std::cout << " (" << r.failed_kept << " of them from before: --retry-failed reruns them)";
    std::cout << ") in " << r.wall_s << " s; results in " << dir << "/results.csv\n";
  }
  return c.failed + c.missing > 0 ? exit_failure : exit_ok;
}

int run_planned_sweep(const std::string& dir, const sweep_plan& plan, size_t jobs, bool quiet,
                      double cell_time_limit_s) {
  local_run_options options;
  options.self = self_executable();
  options.jobs = jobs > 0 ? jobs : std::max(1u, std::thread::hardware_concurrency());
  options.progress = !quiet;
  options.cell_time_limit_s = cell_time_limit_s;
  local_run_result r = run_local(dir, plan, options);
  collect_result c = collect(dir, plan);
  warn_about_load(c, dir);
  if (!quiet)
    std::cout << "sweep: " << plan.cells.size() << " cells (" << r.skipped << " already done, "
              << r.ran << " run, " << c.failed + c.missing << " failed) in " << r.wall_s
              << " s with " << options.jobs << " workers; results in " << dir
              << "/results.csv\n";
  return c.failed + c.missing > 0 ? exit_failure : exit_ok;
}

int run_sweep(const sweep_args& args) {
  const std::string& dir = args.out_dir;
  if (!args.cell.empty())
    return run_cell(dir, read_plan(dir), args.cell);
  if (!args.task_file.empty())  // the sweep's runner holds the folder's lock meanwhile
    return run_slurm_task(dir, read_plan(dir), args.task_file, args.task,
                          args.jobs > 0 ? args.jobs : 1, args.cell_time_limit_s, !args.quiet);
  sweep_runner runner = args.runner == "slurm" ? sweep_runner::slurm : sweep_runner::local;
  make_directories(dir);
  folder_lock lock(dir + "/.lock", "sweep folder " + dir);
  if (args.collect_only) {
    sweep_plan plan = read_plan(dir);
    collect_result c = collect(dir, plan, slurm_cell_notes(dir, plan));
    warn_about_load(c, dir);
    if (!args.quiet)
      std::cout << "sweep: collected " << c.ok << " cells, " << c.failed << " failed, "
                << c.missing << " not run; results in " << dir << "/results.csv\n";
    return c.failed + c.missing > 0 ? exit_failure : exit_ok;
  }
  sweep_spec spec = sweep_spec_of(args);
  sweep_plan plan = make_plan(spec);
  warn_if_seeds_change_nothing(spec, plan);
  if (auto other = plan_of_other_build(dir))
    std::cerr << "sweep: WARNING: " << *other << '\n';
  write_plan(dir, plan);
  if (args.plan_only) {
    if (!args.quiet)
      std::cout << "sweep: " << plan.cells.size() << " cells planned in " << dir
                << "/plan.json; run each id of " << dir << "/cells.txt as\n  kvtier sweep --out "
                << dir << " --cell ID\nthen merge with\n  kvtier sweep --out " << dir
                << " --collect\n";
    return exit_ok;
  }
  if (runner == sweep_runner::slurm)
    return run_on_slurm(dir, plan, args);
  return run_planned_sweep(dir, plan, args.jobs, args.quiet, args.cell_time_limit_s);
}

}  // namespace kvtier
