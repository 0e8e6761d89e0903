#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "app/commands.hpp"
#include "runtime/config/options.hpp"
#include "sim/sweep/sweep_dir.hpp"

namespace kvtier {

namespace fs = std::filesystem;

namespace {

// Studies are sweep files under configs/studies/, one per study (docs/sweep.md, "Studies"); a
// study whose feature is not built yet carries a "needs" text instead of running, and a study
// with a "search" is an SLO capacity study (slo_study_command.cpp).
std::string studies_dir() { return source_file("configs/studies"); }

nlohmann::json study_json(const std::string& path) {
  std::ifstream in(path);
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw config_error(path + ": not a JSON object");
  return j;
}

std::string study_list() {
  std::string text;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(studies_dir()))
    if (e.path().extension() == ".json")
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& p : files) {
    auto j = study_json(p.string());
    text += "  " + p.stem().string() + ": " + j.value("description", "");
    if (j.contains("needs"))
      text += " [not runnable: needs " + j["needs"].get<std::string>() + "]";
    text += "\n";
  }
  return text;
}

}  // namespace

CLI::App* add_study_command(CLI::App& app, study_args& args) {
  auto* cmd = app.add_subcommand(
    "study", "Run a built-in study (a named sweep, configs/studies/NAME.json) and its report");
  cmd->add_option("name", args.name,
                  "the study (--list names them all), or a study file of one's own (F.json)");
  cmd->add_flag("--list", args.list, "list the studies");
  cmd->add_option("--out", args.out_dir, "the study's folder (default out/study-NAME)");
  cmd->add_option("--jobs", args.jobs, "worker processes at once (default: the core count)");
  cmd->add_option("--set", args.sets, "key=value laid over the study's config (repeatable)");
  cmd->add_flag("--plan", args.plan_only, "plan the study's cells and run nothing");
  cmd->add_flag("--quiet", args.quiet, "no progress lines");
  return cmd;
}

int run_study(const study_args& args) {
  if (args.list || args.name.empty()) {
    std::cout << "studies:\n" << study_list();
    return args.list ? exit_ok : exit_bad_input;
  }
  // A name ending in .json is a study file of one's own (docs/sweep.md, "Studies").
  bool own_file = fs::path(args.name).extension() == ".json";
  std::string path = own_file ? args.name : studies_dir() + "/" + args.name + ".json";
  if (own_file && !fs::exists(path))
    throw config_error(path + ": no such study file");
  if (!fs::exists(path))
    throw config_error("no study named " + args.name + "; the studies are:\n" + study_list());
  auto j = study_json(path);
  if (j.contains("needs"))
    throw config_error("study " + args.name + " needs " + j["needs"].get<std::string>()
                       + ", which kvtier does not have yet");
  if (j.contains("search"))
    return run_slo_study_command(path, args);
  sweep_args sweep;
  sweep.file = path;
  sweep.config.sets = args.sets;
  sweep.out_dir =
    args.out_dir.empty() ? "out/study-" + fs::path(args.name).stem().string() : args.out_dir;
  sweep.jobs = args.jobs;
  sweep.plan_only = args.plan_only;
  sweep.quiet = args.quiet;
  int code = run_sweep(sweep);
  if (args.plan_only || code == exit_bad_input)
    return code;
  report_args report;
  report.dir = sweep.out_dir;
  report.title = "Study " + args.name + ": " + j.value("description", "");
  int report_code = run_report(report);
  return code != exit_ok ? code : report_code;
}

}  // namespace kvtier
