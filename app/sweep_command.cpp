#include <iostream>
#include <thread>

#include "app/commands.hpp"
#include "app/load_config.hpp"
#include "sim/sweep/local_runner.hpp"
#include "sim/sweep/sweep_dir.hpp"

namespace kvtier {

CLI::App* add_sweep_command(CLI::App& app, sweep_args& args) {
  auto* cmd = app.add_subcommand(
    "sweep", "Replay a grid of configurations (cells) in parallel worker processes and merge "
             "their summaries into results.csv (docs/sweep.md)");
  add_config_options(*cmd, args.config);
  cmd->add_option("--trace", args.traces,
                  "trace file (repeatable; merged into one trace set). Default: the sweep file's, "
                  "else the bundled sample");
  cmd->add_option("--grid", args.grids,
                  "an axis: key=value1,value2,... (repeatable; the grid is every combination)");
  cmd->add_option("--seeds", args.seeds, "seeds, comma separated (each one a cell)");
  cmd->add_option("--file", args.file, "a JSON sweep file (docs/sweep.md); options add to it");
  cmd->add_option("--mode", args.mode, "full or hitrate (default: the file's, else full)")
    ->check(CLI::IsMember({"full", "hitrate"}));
  cmd->add_option("--format", args.format, "trace format")
    ->check(CLI::IsMember({"auto", "mooncake", "azure", "agentic", "native"}));
  cmd->add_option("--out", args.out_dir, "the sweep's folder")->capture_default_str();
  cmd->add_option("--jobs", args.jobs, "worker processes at once (default: the core count)");
  cmd->add_flag("--plan", args.plan_only,
                "write plan.json and cells.txt, run nothing (for job arrays, GNU parallel)");
  cmd->add_option("--cell", args.cell, "run one cell of the plan in --out (a worker's entry)");
  cmd->add_flag("--collect", args.collect_only, "merge the cells in --out into results.csv/json");
  cmd->add_flag("--deterministic",
                args.deterministic, "write wall-clock figures as 0 (byte-identical results)");
  cmd->add_flag("--quiet", args.quiet, "no progress lines");
  return cmd;
}

sweep_spec sweep_spec_of(const sweep_args& args) {
  sweep_spec spec;
  if (!args.file.empty())
    spec = read_sweep_file(args.file);
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

int run_planned_sweep(const std::string& dir, const sweep_plan& plan, size_t jobs, bool quiet) {
  local_run_options options;
  options.self = self_executable();
  options.jobs = jobs > 0 ? jobs : std::max(1u, std::thread::hardware_concurrency());
  options.progress = !quiet;
  local_run_result r = run_local(dir, plan, options);
  collect_result c = collect(dir, plan);
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
  if (args.collect_only) {
    sweep_plan plan = read_plan(dir);
    collect_result c = collect(dir, plan);
    if (!args.quiet)
      std::cout << "sweep: collected " << c.ok << " cells, " << c.failed << " failed, "
                << c.missing << " not run; results in " << dir << "/results.csv\n";
    return c.failed + c.missing > 0 ? exit_failure : exit_ok;
  }
  sweep_plan plan = make_plan(sweep_spec_of(args));
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
  return run_planned_sweep(dir, plan, args.jobs, args.quiet);
}

}  // namespace kvtier
