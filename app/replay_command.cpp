#include <cstdio>
#include <functional>
#include <iostream>
#include <memory>

#include "app/commands.hpp"
#include "app/load_config.hpp"
#include "app/validators.hpp"
#include "runtime/config/deployment_plan.hpp"
#include "sim/driver/replay_driver.hpp"

namespace kvtier {

namespace {

// Skipped lines are named on stderr (the first few; summary.json counts them all).
std::function<void(const trace_error&)> name_skipped_lines() {
  constexpr uint64_t named_max = 10;
  auto named = std::make_shared<uint64_t>(0);  // shared by every file's reader
  return [named](const trace_error& e) {
    if (*named < named_max)
      std::cerr << "kvtier: skipped " << e.what() << '\n';
    else if (*named == named_max)
      std::cerr << "kvtier: more lines skipped; summary.json counts them (trace.skipped_lines)\n";
    ++*named;
  };
}

// A number as a person would write it: 1e+308, not its 309 digits.
std::string as_written(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", v);
  return text;
}

}  // namespace

CLI::App* add_replay_command(CLI::App& app, replay_args& args) {
  auto* cmd = app.add_subcommand("replay", "Replay request traces through the cache hierarchy");
  add_config_options(*cmd, args.config);
  cmd->add_option("--trace", args.traces,
                  "trace file (repeatable; several merge by arrival time). Default: the bundled "
                  "sample, an excerpt of the Mooncake conversation trace, in the sample scenario "
                  "(configs/sample.json: trace.time_scale=8) under --config and --set. A trace "
                  "given here replays as its config says (as recorded by default)");
  cmd->add_option("--format", args.format, "trace format")
    ->check(CLI::IsMember({"auto", "mooncake", "azure", "agentic", "native"}));
  cmd->add_option("--out", args.out_dir, "output directory (summary.json, requests.csv)")
    ->check(CLI::Validator(
      [](std::string& dir) { return dir.empty() ? "expected a directory name, got ''" : ""; },
      "DIR"))
    ->capture_default_str();
  cmd->add_option("--mode", args.mode,
                  "full: the four actors with timing (latency, traffic); hitrate: cache decisions "
                  "only, no timing")
    ->check(CLI::IsMember({"full", "hitrate"}))
    ->capture_default_str();
  cmd->add_option("--clock", args.clock,
                  "full mode: virtual (deterministic simulated time) or wall (real time)")
    ->check(CLI::IsMember({"virtual", "wall"}))
    ->capture_default_str();
  cmd->add_option("--speed", args.speed, "wall clock: virtual seconds per wall second")
    ->check(finite_positive())
    ->capture_default_str();
  cmd->add_option("--backend", args.backend,
                  "modelled: links and compute from the config; cuda: real block transfers and "
                  "emulated compute on the GPU (wall clock, full mode)")
    ->check(CLI::IsMember({"modelled", "cuda"}))
    ->capture_default_str();
  cmd->add_flag("--verify", args.verify,
                "cuda backend: fill every computed block with a pattern of its hash and check "
                "it after every swap-in and storage read");
  cmd->add_flag("--skip-bad-lines", args.skip_bad_lines,
                "skip and count malformed trace lines instead of stopping");
  cmd->add_option("--check-every", args.check_every,
                  "run the invariant checker every N requests (hitrate) or N commits, one per "
                  "step (full), too; it always runs at the end. Each check walks every "
                  "structure, so its cost grows with the cache: in full mode --check-every 1 "
                  "can make a replay a thousand times slower (for debugging)")
    ->check(unsigned_in_range());
  cmd->add_option("--seed", args.seed,
                  "draws the seeded faults (faults.*: node losses and slow links at a rate, "
                  "failed gets and puts; pd.failure_rate: failed PD handoffs); the same seed, "
                  "traces and config give the same replay. Nothing else is random (ties go by "
                  "trace order, then file order): without a fault configured it changes nothing, "
                  "and a warning says so")
    ->check(unsigned_in_range())
    ->each([&args](const std::string&) { args.seed_given = true; });
  cmd->add_flag("--deterministic", args.deterministic,
                "write wall-clock figures as 0 so outputs are byte-identical across runs");
  cmd->add_flag("--quiet", args.quiet, "print nothing on success");
  cmd->add_flag("--print-plan", args.print_plan,
                "print the deployment plan this replay would run as JSON (each instance's role "
                "and tiers, the storage backend, every config key with its value and where it "
                "came from: default, preset, file, --set or a cluster group's overrides) and "
                "stop without replaying");
  // Options that the chosen mode would ignore are refused: a user who gave them expects an effect.
  cmd->callback([cmd, &args] {
    bool clock = cmd->count("--clock") > 0, speed = cmd->count("--speed") > 0;
    if (args.mode == "hitrate" && (clock || speed))
      throw CLI::ValidationError(clock ? "--clock" : "--speed",
                                 "--mode hitrate replays without a clock; --clock and --speed "
                                 "apply to --mode full");
    // Virtual time is wall time x speed in 64-bit nanoseconds: past this pace it would overflow
    // within hours of wall time, and no trace needs more.
    constexpr double max_speed = 1e6;
    if (speed && args.speed > max_speed)
      throw CLI::ValidationError("--speed", "at most 1e6 virtual seconds per wall second (" +
                                              as_written(args.speed) + " given); for "
                                              "faster, use --clock virtual");
    if (speed && args.clock != "wall" && args.backend != "cuda")
      throw CLI::ValidationError("--speed", "sets the pace of the wall clock: it needs --clock "
                                            "wall (the virtual clock runs as fast as it can)");
  });
  return cmd;
}

int run_replay(const replay_args& in) {
  replay_args args = in;
  std::vector<std::string> under;
  if (args.traces.empty()) {
    args.traces.push_back(default_trace_path());
    under = sample_defaults();
  }
  if (args.backend == "cuda" &&
      (args.mode != "full" || (args.clock == "virtual" && args.speed != 1.0)))
    throw config_error("--backend cuda replays in full mode on the wall clock");
  replay_job job;
  job.cfg = load_config(args.config, under);
  job.traces = args.traces;
  job.format = args.format;
  job.mode = args.mode == "hitrate" ? replay_mode::hitrate : replay_mode::full;
  job.clock = args.clock == "wall" ? clock_mode::wall : clock_mode::virtual_time;
  job.speed = args.speed;
  job.backend = args.backend == "cuda" ? copy_backend_kind::cuda : copy_backend_kind::modelled;
  job.verify = args.verify;
  job.skip_bad_lines = args.skip_bad_lines;
  job.on_skip = name_skipped_lines();
  job.check_every = args.check_every;
  job.deterministic = args.deterministic;
  job.out_dir = args.out_dir;
  job.progress = !args.quiet;
  job.seed = args.seed;
  if (args.print_plan) {
    std::cout << plan_json(resolve_plan(job.cfg, job)).dump(2) << '\n';
    return exit_ok;
  }
  bool faults = job.cfg.number(keys::pd::failure_rate) > 0 ||
                seeded_draws(job.cfg).find("faults.*") != std::string::npos;
  if (args.seed_given && seeded_draws(job.cfg).empty())
    std::cerr << "kvtier: warning: --seed changes nothing: no fault is configured (faults.*, "
                 "pd.failure_rate), no workload variant (trace.sample_fraction, "
                 "trace.arrival_jitter_s, trace.session_shift_s), "
                 "and a replay makes no other random choice\n";
  replay_result result = run_replay_job(job);
  if (!args.quiet)
    std::cout << result.text;
  for (const std::string& w : result.warnings)
    std::cerr << "kvtier: warning: " << w << '\n';
  int code = exit_ok;
  if (faults && result.failed())
    std::cerr << "kvtier: the faulted replay failed with --seed " << args.seed
              << "; rerun it with the same config, traces and --seed " << args.seed << '\n';
  if (result.invariant_violations > 0) {
    std::cerr << "kvtier: " << result.invariant_violations << " invariant violations; first: "
              << result.first_violation << '\n';
    code = exit_failure;
  }
  if (!result.drained) {
    std::cerr << "kvtier: the replay stopped with requests unfinished (see summary.json)\n";
    code = exit_failure;
  }
  return code;
}

}  // namespace kvtier
