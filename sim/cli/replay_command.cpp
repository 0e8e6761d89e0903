#include <chrono>
#include <iostream>
#include <memory>

#include "sim/cli/commands.hpp"
#include "sim/cli/load_config.hpp"
#include "sim/cli/progress.hpp"
#include "sim/config/replay_config.hpp"
#include "sim/full/full_replay.hpp"
#include "sim/report/full_report.hpp"
#include "sim/hitrate/hitrate_replay.hpp"
#include "sim/report/atomic_file.hpp"
#include "sim/report/hitrate_report.hpp"
#include "sim/request_blocks.hpp"
#include "sim/trace/trace_reader.hpp"

namespace kvtier {

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

std::vector<std::unique_ptr<trace_source>> open_traces(const replay_args& args) {
  auto format = parse_trace_format(args.format);
  if (!format)
    throw trace_error(args.format, 0, "--format", "unknown trace format");
  reader_options options;
  options.skip_bad_lines = args.skip_bad_lines;
  // Skipped lines are named on stderr (the first few; summary.json counts them all).
  constexpr uint64_t named_max = 10;
  auto named = std::make_shared<uint64_t>(0);  // shared by every file's reader
  options.on_skip = [named](const trace_error& e) {
    if (*named < named_max)
      std::cerr << "kvtier: skipped " << e.what() << '\n';
    else if (*named == named_max)
      std::cerr << "kvtier: more lines skipped; summary.json counts them (trace.skipped_lines)\n";
    ++*named;
  };
  std::vector<std::unique_ptr<trace_source>> sources;
  for (size_t i = 0; i < args.traces.size(); ++i)
    sources.push_back(open_trace(args.traces[i], *format, static_cast<uint32_t>(i), options));
  return sources;
}

int replay_hitrate(const replay_args& args, const config& cfg) {
  auto start = clock_type::now();
  replay_config rc = resolve(cfg);
  trace_merger merger(open_traces(args));
  request_blocks mapper(rc.block_size, args.traces);
  hitrate_replay replay(rc, args.check_every);
  make_directories(args.out_dir);
  atomic_file csv(args.out_dir + "/requests.csv");
  write_hitrate_csv_header(csv.out());

  run_info run;
  run.config = cfg.effective();
  run.seed = args.seed;
  run.deterministic = args.deterministic;
  std::vector<uint64_t> per_file(args.traces.size(), 0);
  progress_bar progress("replay", merger.bytes_total(), !args.quiet);
  trace_request request;
  std::vector<cache_block> blocks;
  request_outcome outcome;
  double parse_s = 0;
  for (;;) {
    auto t0 = clock_type::now();
    bool more = merger.next(request);
    parse_s += seconds_since(t0);
    if (!more)
      break;
    mapper.map(request, blocks);
    replay.process(request, blocks, outcome);
    write_hitrate_csv_row(csv.out(), request, outcome);
    ++per_file[request.file];
    progress.update(merger.bytes_read(), replay.totals().requests);
  }
  progress.finish();
  const invariant_report& inv = replay.finish();

  for (size_t i = 0; i < args.traces.size(); ++i) {
    const auto& src = merger.sources()[i];
    run.files.push_back({args.traces[i], to_string(src->format()), per_file[i], src->skipped()});
  }
  run.parse_s = parse_s;
  run.wall_s = seconds_since(start);
  nlohmann::json summary = hitrate_summary(replay, run);
  csv.commit();
  atomic_file summary_file(args.out_dir + "/summary.json");
  summary_file.out() << summary.dump(2) << '\n';
  summary_file.commit();
  if (!args.quiet)
    std::cout << hitrate_text(summary, args.out_dir);
  if (!inv.ok()) {
    std::cerr << "kvtier: " << inv.violations << " invariant violations; first: "
              << inv.messages.front() << '\n';
    return exit_failure;
  }
  return exit_ok;
}

int replay_full(const replay_args& args, const config& cfg) {
  auto start = clock_type::now();
  replay_config rc = resolve(cfg);
  timed_config timed = resolve_timed(cfg, rc);
  if (args.backend == "cuda")
    use_cuda_backend(timed, rc, args.verify);
  trace_merger merger(open_traces(args));
  request_blocks mapper(rc.block_size, args.traces);
  std::vector<uint64_t> per_file(args.traces.size(), 0);
  uint64_t read = 0;
  double parse_s = 0;
  // Inputs are read inside the scheduler actor: their errors are kept and raised here.
  std::exception_ptr failure;
  request_source source;
  source.next = [&](trace_request& r) {
    if (failure)
      return false;
    try {
      auto t0 = clock_type::now();
      bool more = merger.next(r);
      parse_s += seconds_since(t0);
      if (more) {
        ++per_file[r.file];
        ++read;
      }
      return more;
    } catch (...) {
      failure = std::current_exception();
      return false;
    }
  };
  source.blocks_of = [&](const trace_request& r, std::vector<cache_block>& out) {
    try {
      mapper.map(r, out);
    } catch (...) {
      if (!failure)
        failure = std::current_exception();
      out.clear();
    }
  };
  progress_bar progress("replay", merger.bytes_total(), !args.quiet);
  full_run_options options;
  options.mode = args.clock == "wall" || args.backend == "cuda" ? clock_mode::wall
                                                                : clock_mode::virtual_time;
  options.speed = args.speed;
  options.progress = [&] { progress.update(merger.bytes_read(), read); };
  options.stop = [&] { return failure != nullptr; };
  full_result result = run_full_replay(timed, std::move(source), options);
  progress.finish();
  if (failure)
    std::rethrow_exception(failure);

  std::vector<trace_file_info> files;
  for (size_t i = 0; i < args.traces.size(); ++i) {
    const auto& src = merger.sources()[i];
    files.push_back({args.traces[i], to_string(src->format()), per_file[i], src->skipped()});
  }
  run_info run;
  run.config = cfg.effective();
  run.seed = args.seed;
  run.deterministic = args.deterministic;
  run.parse_s = parse_s;
  run.wall_s = seconds_since(start);
  nlohmann::json summary = full_summary(result, run, files);
  make_directories(args.out_dir);
  atomic_file csv(args.out_dir + "/requests.csv");
  write_full_csv(csv.out(), result);
  csv.commit();
  atomic_file summary_file(args.out_dir + "/summary.json");
  summary_file.out() << summary.dump(2) << '\n';
  summary_file.commit();
  if (!args.quiet)
    std::cout << full_text(summary, args.out_dir);
  int code = exit_ok;
  if (result.controller.invariant_violations > 0) {
    std::cerr << "kvtier: " << result.controller.invariant_violations
              << " invariant violations; first: " << result.controller.invariant_messages.front()
              << '\n';
    code = exit_failure;
  }
  if (!result.scheduler.drained) {
    std::cerr << "kvtier: the replay stopped with requests unfinished (see summary.json)\n";
    code = exit_failure;
  }
  return code;
}

}  // namespace

CLI::App* add_replay_command(CLI::App& app, replay_args& args) {
  auto* cmd = app.add_subcommand("replay", "Replay request traces through the cache hierarchy");
  add_config_options(*cmd, args.config);
  cmd->add_option("--trace", args.traces,
                  "trace file (repeatable; several merge by arrival time). Default: the bundled "
                  "sample, an excerpt of the Mooncake conversation trace");
  cmd->add_option("--format", args.format, "trace format")
    ->check(CLI::IsMember({"auto", "mooncake", "azure", "agentic", "native"}));
  cmd->add_option("--out", args.out_dir, "output directory (summary.json, requests.csv)")
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
    ->check(CLI::PositiveNumber)
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
                  "run the invariant checker every N requests too (it always runs at the end)");
  cmd->add_option("--seed", args.seed, "seed of every random choice")->capture_default_str();
  cmd->add_flag("--deterministic", args.deterministic,
                "write wall-clock figures as 0 so outputs are byte-identical across runs");
  cmd->add_flag("--quiet", args.quiet, "print nothing on success");
  return cmd;
}

int run_replay(const replay_args& in) {
  replay_args args = in;
  if (args.traces.empty())
    args.traces.push_back(default_trace_path());
  config cfg = load_config(args.config);
  if (args.backend == "cuda" && (args.mode != "full" || args.clock == "virtual" && args.speed != 1.0))
    throw config_error("--backend cuda replays in full mode on the wall clock");
  if (args.verify && args.backend != "cuda")
    throw config_error("--verify checks real bytes: it needs --backend cuda");
  if (args.mode == "hitrate")
    return replay_hitrate(args, cfg);
  return replay_full(args, cfg);
}

}  // namespace kvtier
