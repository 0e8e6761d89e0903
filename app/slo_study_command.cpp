#include <cstdio>
#include <filesystem>
#include <iostream>
#include <thread>

#include "app/commands.hpp"
#include "app/python_script.hpp"
#include "runtime/config/options.hpp"
#include "sim/sweep/local_runner.hpp"
#include "sim/sweep/slo_study.hpp"

namespace kvtier {

namespace {

std::string figure(const char* format, double x) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, x);
  return buf;
}

void print_capacities(const slo_study_result& r) {
  std::cout << "slo: TTFT p99 <= " << r.limits.ttft_p99_ms << " ms, TPOT p99 <= "
            << r.limits.tpot_p99_ms << " ms, to " << r.limits.precision * 100 << "% ("
            << r.replays << " replays)\n";
  for (const auto& row : r.rows) {
    std::string name;
    for (const auto& [axis, label] : row.grid)
      name += (name.empty() ? "" : " ") + axis + "=" + label;
    std::cout << "  " << name << ": ";
    if (row.sustained_rate == 0)
      std::cout << "no rate meets the SLO (" << row.outcome << ")\n";
    else
      std::cout << "sustains " << figure("%.4g", row.sustained_rate) << "x the recorded "
                << (row.searched_key == "trace.session_copies" ? "sessions (" : "rate (")
                << figure("%.3f", row.requests_per_s) << " req/s, TTFT p99 "
                << figure("%.0f", row.ttft_p99_ms) << " ms, TPOT p99 "
                << figure("%.1f", row.tpot_p99_ms) << " ms; " << row.outcome << " in "
                << row.iterations << " replays)\n";
  }
}

}  // namespace

int run_slo_study_command(const std::string& path, const study_args& args) {
  if (args.plan_only)
    throw config_error("--plan: an SLO study chooses each round's rates from the last round's "
                       "results, so it cannot be planned ahead");
  sweep_spec spec = read_sweep_file(path);
  for (const auto& s : args.sets)
    spec.sets.push_back(s);
  std::string dir = args.out_dir.empty()
                      ? "out/study-" + std::filesystem::path(args.name).stem().string()
                      : args.out_dir;
  local_run_options run;
  run.self = self_executable();
  run.jobs = args.jobs > 0 ? args.jobs : std::max(1u, std::thread::hardware_concurrency());
  run.progress = !args.quiet;
  slo_study_result r = run_slo_study(dir, spec, run);
  if (!args.quiet)
    print_capacities(r);
  int report = run_python_script("tools/slo_report.py", {dir});
  if (r.failed_replays > 0)
    std::cerr << "slo: " << r.failed_replays << " replays failed (counted as not meeting the "
              << "SLO; see " << dir << "/results.csv)\n";
  return report != 0 ? exit_failure : exit_ok;
}

}  // namespace kvtier
