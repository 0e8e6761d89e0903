#include <filesystem>
#include <vector>

#include "app/commands.hpp"
#include "app/python_script.hpp"
#include "runtime/config/options.hpp"

namespace kvtier {

CLI::App* add_report_command(CLI::App& app, report_args& args) {
  auto* cmd = app.add_subcommand(
    "report", "Turn a sweep folder into report.md with tables and figures (PNG, SVG, PDF), or "
              "plot a replay's timeseries.csv (docs/sweep.md, \"Reports\")");
  cmd->add_option("dir", args.dir, "the sweep's folder (holding results.csv)")->required();
  cmd->add_option("--title", args.title, "the report's title");
  cmd->add_option("--x", args.x, "the grid axis along the figures' x (default: a capacity axis)");
  cmd->add_option("--series", args.series,
                  "one line per value of this axis (default: a *policy* axis)");
  cmd->add_option("--facet", args.facet, "a panel per value of this axis (default: traces)");
  cmd->add_option("--filter", args.filters, "KEY=VALUE: only cells with this grid value "
                  "(repeatable; a key given twice keeps either value)");
  cmd->add_option("--metric", args.metrics,
                  "a results column to plot instead of the default figures, as "
                  "plots/metric-COLUMN.* (repeatable; with --out, away from the default report)");
  cmd->add_option("--scale", args.scales,
                  "x=log|linear or y=log|linear (default: log where values span decades)");
  cmd->add_flag("--logx", args.logx, "log x axis");
  cmd->add_flag("--logy", args.logy, "log y axis");
  cmd->add_flag("--timeseries", args.timeseries,
                "dir is one replay's folder: plot its timeseries.csv (output.timeseries)");
  cmd->add_option("--interval", args.interval_s,
                  "with --timeseries: seconds per point (default: a round number that gives "
                  "about 200 points over the run)")
    ->check(CLI::PositiveNumber);
  cmd->add_option("--out", args.out_dir,
                  "write report.md and plots/ (or the time series' plots/) here instead of into "
                  "dir; the figures an earlier report wrote there are replaced, never left stale");
  return cmd;
}

namespace {

// The script's arguments for what the figures show.
void add_figure_options(const report_args& args, std::vector<std::string>& argv) {
  auto pass = [&](const char* flag, const std::string& value) {
    if (value.empty())
      return;
    argv.push_back(flag);
    argv.push_back(value);
  };
  pass("--x", args.x);
  pass("--series", args.series);
  pass("--facet", args.facet);
  for (const auto& f : args.filters)
    pass("--filter", f);
  for (const auto& m : args.metrics)
    pass("--metric", m);
  for (const auto& s : args.scales)
    pass("--scale", s);
  if (args.logx)
    argv.push_back("--logx");
  if (args.logy)
    argv.push_back("--logy");
}

}  // namespace

int run_report(const report_args& args) {
  if (args.timeseries && !std::filesystem::exists(args.dir + "/timeseries.csv"))
    throw config_error(args.dir + "/timeseries.csv: no time series here (replay in full mode "
                       "with --set output.timeseries=true)");
  if (!args.timeseries && !std::filesystem::exists(args.dir + "/results.csv"))
    throw config_error(args.dir + "/results.csv: no sweep results here (run kvtier sweep first)");
  std::vector<std::string> argv_s = {args.dir};
  if (!args.title.empty()) {
    argv_s.push_back("--title");
    argv_s.push_back(args.title);
  }
  add_figure_options(args, argv_s);
  if (!args.out_dir.empty()) {
    argv_s.push_back("--out");
    argv_s.push_back(args.out_dir);
  }
  if (args.timeseries) {
    argv_s.push_back("--timeseries");
    if (args.interval_s > 0) {
      argv_s.push_back("--interval");
      argv_s.push_back(std::to_string(args.interval_s));
    }
  } else if (args.interval_s > 0) {
    throw config_error("--interval: a time series' option (--timeseries)");
  }
  return run_python_script("tools/sweep_report.py", argv_s);
}

}  // namespace kvtier
