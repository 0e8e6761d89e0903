#include "sim/driver/replay_driver.hpp"

#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>

#include "sim/config/replay_config.hpp"
#include "sim/driver/progress.hpp"
#include "sim/full/full_replay.hpp"
#include "sim/full/time_limits.hpp"
#include "sim/hitrate/hitrate_replay.hpp"
#include "sim/report/atomic_file.hpp"
#include "sim/report/full_report.hpp"
#include "sim/report/hitrate_report.hpp"
#include "sim/request_blocks.hpp"

namespace kvtier {

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

std::vector<std::unique_ptr<trace_source>> open_traces(const replay_job& job) {
  auto format = parse_trace_format(job.format);
  if (!format)
    throw trace_error(job.format, 0, "--format", "unknown trace format");
  reader_options options;
  options.skip_bad_lines = job.skip_bad_lines;
  options.on_skip = job.on_skip;
  std::vector<std::unique_ptr<trace_source>> sources;
  for (size_t i = 0; i < job.traces.size(); ++i)
    sources.push_back(open_trace(job.traces[i], *format, static_cast<uint32_t>(i), options));
  return sources;
}

std::vector<trace_file_info> file_infos(const replay_job& job, const trace_merger& merger,
                                        const std::vector<uint64_t>& per_file) {
  std::vector<trace_file_info> files;
  for (size_t i = 0; i < job.traces.size(); ++i) {
    const auto& src = merger.sources()[i];
    files.push_back({job.traces[i], to_string(src->format()), per_file[i], src->skipped()});
  }
  return files;
}

run_info run_info_of(const replay_job& job) {
  run_info run;
  run.config = job.cfg.effective();
  run.deterministic = job.deterministic;
  return run;
}

void write_summary(const replay_job& job, const nlohmann::json& summary) {
  atomic_file summary_file(job.out_dir + "/summary.json");
  summary_file.out() << summary.dump(2) << '\n';
  summary_file.commit();
}

// On the wall clock the host's overhead runs on the replay's clock `speed` times over; once it is
// more than this share of the virtual time, the figures say more about the host than the model.
constexpr double lag_warning_share = 0.01;

std::optional<std::string> lag_warning(const replay_job& job, const nlohmann::json& summary) {
  const nlohmann::json& sim = summary["simulation"];
  double share = sim["lag_share"].get<double>();
  if (share <= lag_warning_share)
    return std::nullopt;
  char text[320];
  std::snprintf(text, sizeof(text),
                "the replay fell %.3f s behind the wall clock at --speed %g (%.1f%% of its %.3f s "
                "of virtual time; longest delay %.3f ms): host overhead is in its latencies; "
                "use a lower --speed or the virtual clock",
                sim["lag_s"].get<double>(), job.speed, share * 100,
                sim["virtual_s"].get<double>(), sim["lag_max_ms"].get<double>());
  return std::string(text);
}

replay_result replay_hitrate(const replay_job& job) {
  auto start = clock_type::now();
  replay_config rc = resolve(job.cfg);
  trace_merger merger(open_traces(job));
  request_blocks mapper(rc.block_size, job.traces);
  hitrate_replay replay(rc, job.check_every);
  std::unique_ptr<atomic_file> csv;
  if (!job.out_dir.empty()) {
    make_directories(job.out_dir);
    csv = std::make_unique<atomic_file>(job.out_dir + "/requests.csv");
    write_hitrate_csv_header(csv->out());
  }
  run_info run = run_info_of(job);
  std::vector<uint64_t> per_file(job.traces.size(), 0);
  progress_bar progress("replay", merger.bytes_total(), job.progress);
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
    if (csv)
      write_hitrate_csv_row(csv->out(), request, outcome);
    ++per_file[request.file];
    progress.update(merger.bytes_read(), replay.totals().requests);
  }
  progress.finish();
  const invariant_report& inv = replay.finish();
  run.files = file_infos(job, merger, per_file);
  run.parse_s = parse_s;
  run.wall_s = seconds_since(start);
  replay_result result;
  result.summary = hitrate_summary(replay, run);
  result.text = hitrate_text(result.summary, job.out_dir);
  result.invariant_violations = inv.violations;
  if (!inv.ok())
    result.first_violation = inv.messages.front();
  if (csv) {
    csv->commit();
    write_summary(job, result.summary);
  }
  return result;
}

replay_result replay_full(const replay_job& job) {
  auto start = clock_type::now();
  replay_config rc = resolve(job.cfg);
  timed_config timed = resolve_timed(job.cfg, rc);
  timed.controller.check_every = job.check_every;
  if (job.cuda)
    use_cuda_backend(timed, rc, job.verify);
  check_time_limits(timed);
  trace_merger merger(open_traces(job));
  request_blocks mapper(rc.block_size, job.traces);
  std::vector<uint64_t> per_file(job.traces.size(), 0);
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
        check_request_times(r, timed.scheduler.time_scale, job.traces[r.file],
                            merger.sources()[r.file]->format());
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
  progress_bar progress("replay", merger.bytes_total(), job.progress);
  full_run_options options;
  options.mode = job.wall_clock || job.cuda ? clock_mode::wall : clock_mode::virtual_time;
  options.speed = job.speed;
  options.progress = [&] { progress.update(merger.bytes_read(), read); };
  options.stop = [&] { return failure != nullptr; };
  full_result fr = run_full_replay(timed, std::move(source), options);
  progress.finish();
  if (failure)
    std::rethrow_exception(failure);
  check_virtual_time(fr);

  run_info run = run_info_of(job);
  run.parse_s = parse_s;
  run.wall_s = seconds_since(start);
  replay_result result;
  result.summary = full_summary(fr, run, file_infos(job, merger, per_file));
  result.text = full_text(result.summary, job.out_dir);
  result.invariant_violations = fr.controller.invariant_violations;
  if (!fr.controller.invariant_messages.empty())
    result.first_violation = fr.controller.invariant_messages.front();
  result.drained = fr.scheduler.drained;
  if (auto w = lag_warning(job, result.summary))
    result.warnings.push_back(*w);
  if (!job.out_dir.empty()) {
    make_directories(job.out_dir);
    atomic_file csv(job.out_dir + "/requests.csv");
    write_full_csv(csv.out(), fr);
    csv.commit();
    write_summary(job, result.summary);
  }
  return result;
}

}  // namespace

replay_result run_replay_job(const replay_job& job) {
  if (job.traces.empty())
    throw config_error("a replay needs at least one trace");
  if (job.cuda && job.mode != replay_mode::full)
    throw config_error("--backend cuda replays in full mode on the wall clock");
  if (job.verify && !job.cuda)
    throw config_error("--verify checks real bytes: it needs --backend cuda");
  return job.mode == replay_mode::hitrate ? replay_hitrate(job) : replay_full(job);
}

}  // namespace kvtier
