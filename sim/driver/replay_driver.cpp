#include "sim/driver/replay_driver.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>

#include "runtime/config/keys.hpp"
#include "runtime/config/deployment_plan.hpp"
#include "sim/driver/progress.hpp"
#include "sim/full/full_replay.hpp"
#include "sim/full/pd_end_checks.hpp"
#include "sim/full/request_count_checks.hpp"
#include "model/scheduler/recompute_balance.hpp"
#include "sim/full/time_checks.hpp"
#include "sim/full/trace_feed.hpp"
#include "sim/hitrate/hitrate_replay.hpp"
#include "sim/report/atomic_file.hpp"
#include "sim/report/fault_report.hpp"
#include "sim/report/full_report.hpp"
#include "sim/report/hitrate_report.hpp"
#include "sim/report/provenance.hpp"
#include "sim/report/timeseries.hpp"
#include "sim/request_blocks.hpp"
#include "sim/trace/session_copies.hpp"
#include "sim/trace/workload_variant.hpp"

namespace kvtier {

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

const std::vector<std::string> output_names = {"summary.json", "requests.csv"};

workload_variant variant_of(const trace_plan& t, uint64_t seed) {
  workload_variant v;
  v.seed = seed;
  v.sample_fraction = t.sample_fraction;
  v.arrival_jitter_s = t.arrival_jitter_s;
  v.session_shift_s = t.session_shift_s;
  return v;
}

std::vector<std::unique_ptr<trace_source>> open_traces(const replay_job& job,
                                                       const trace_plan& t) {
  auto format = parse_trace_format(job.format);
  if (!format)
    throw trace_error(job.format, 0, "--format", "unknown trace format");
  reader_options options;
  options.skip_bad_lines = job.skip_bad_lines;
  options.on_skip = job.on_skip;
  options.max_line_bytes = t.max_line_bytes;
  options.max_document_bytes = t.max_document_bytes;
  workload_variant variant = variant_of(t, job.seed);
  // Copy 0 of every file first: the merger's first sources are the files as given.
  uint32_t copies = t.session_copies;
  std::vector<std::unique_ptr<trace_source>> sources;
  for (uint32_t copy = 0; copy < copies; ++copy)
    for (size_t i = 0; i < job.traces.size(); ++i) {
      auto file = static_cast<uint32_t>(i);
      auto source = session_copy(open_trace(job.traces[i], *format, file, options), copy);
      sources.push_back(vary_workload(std::move(source), file, variant, copy));
    }
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

run_info run_info_of(const replay_job& job, const deployment_plan& plan) {
  run_info run;
  run.config = job.cfg.effective();
  run.config.erase("serve");  // the live server's keys change no replay
  run.config.erase("output");  // nor do the optional outputs
  run.config.erase("slo");     // nor do the SLO study's limits
  run.model = plan.model_summary;
  run.deterministic = job.deterministic;
  return run;
}

request_blocks mapper_of(const replay_job& job, const deployment_plan& plan) {
  return request_blocks(plan.run.block_size, job.traces, plan.trace.max_blocks_per_request);
}

// The outputs of one run: the folder is made (and checked writable, by opening both temporaries)
// before the replay starts, and both files are renamed into place together at the end.
struct run_outputs {
  explicit run_outputs(const std::string& dir)
    : folder(dir, output_names),
      summary(folder.file("summary.json")),
      csv(folder.file("requests.csv")) {}

  void commit(const nlohmann::json& summary_json) {
    summary.out() << summary_json.dump(2) << '\n';
    // requests.csv first: a crash between the renames leaves the old summary.json, which the
    // new requests.csv is then newer than (docs/outputs.md).
    commit_together({&csv, &summary});
    folder.keep();
  }

  output_folder folder;  // first: removed (if it is new and empty) after the files
  atomic_file summary;
  atomic_file csv;
};

// An --out that cannot be made or written is bad input, found before anything is replayed.
std::unique_ptr<run_outputs> open_outputs(const replay_job& job) {
  if (job.out_dir.empty())
    return nullptr;
  try {
    return std::make_unique<run_outputs>(job.out_dir);
  } catch (const std::runtime_error& e) {
    throw config_error(std::string("--out: ") + e.what());
  }
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

// One line for the terminal: what was injected, and what came of it.
std::string fault_text(const nlohmann::json& f) {
  const nlohmann::json& in = f["injected"];
  const nlohmann::json& out = f["outcomes"];
  char line[400];
  std::snprintf(line, sizeof(line),
                "  faults          seed %llu: %llu node losses (%llu blocks lost), %llu slow-link "
                "windows, %llu failed gets, %llu failed puts; %llu loads failed (recomputed)\n",
                f["seed"].get<unsigned long long>(), in["node_losses"].get<unsigned long long>(),
                out["blocks_lost"].get<unsigned long long>(),
                in["slow_link_windows"].get<unsigned long long>(),
                in["get_failures"].get<unsigned long long>(),
                in["put_failures"].get<unsigned long long>(),
                out["failed_loads"].get<unsigned long long>());
  return line;
}

replay_result replay_hitrate(const replay_job& job, const deployment_plan& plan) {
  auto start = clock_type::now();
  refuse_unreplayed_keys(job.cfg);  // what one cache would ignore (cluster.instances, ...)
  std::unique_ptr<run_outputs> outputs = open_outputs(job);
  trace_merger merger(open_traces(job, plan.trace));
  request_blocks mapper = mapper_of(job, plan);
  hitrate_replay replay(plan.run, job.check_every);
  std::ostream* csv = outputs ? &outputs->csv.out() : nullptr;
  if (csv)
    write_hitrate_csv_header(*csv);
  const double time_scale = plan.front.time_scale;
  run_info run = run_info_of(job, plan);
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
      write_hitrate_csv_row(*csv, request, outcome, time_scale);
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
  result.summary["kvtier"] = build_info_json();
  result.text = hitrate_text(result.summary, job.out_dir);
  result.invariant_violations = inv.violations;
  if (!inv.ok())
    result.first_violation = inv.messages.front();
  if (outputs)
    outputs->commit(result.summary);
  return result;
}

// The end-of-run checks beyond the controller's own: their violations join its count, and the
// first of them is reported when the controller found none.
void add_end_checks(const full_result& fr, replay_result& result) {
  result.invariant_violations = fr.controller.invariant_violations;
  if (!fr.controller.invariant_messages.empty())
    result.first_violation = fr.controller.invariant_messages.front();
  // A storage read whose bytes were not what was stored breaks the pool's first promise.
  result.invariant_violations += fr.engine.payload_errors;
  if (fr.engine.payload_errors > 0 && result.first_violation.empty())
    result.first_violation = std::to_string(fr.engine.payload_errors)
                             + " storage reads returned bytes that were not what was stored";
  // The pool keeps its promises at the end too: its index is sound, and a drained replay leaves
  // nothing leased, pending or in flight in it.
  std::vector<std::string> pool = fr.storage.invariant_messages;
  if (fr.drained)
    pool = storage_end_problems(fr.storage);
  // A disaggregated run ends each request once, however often decode instances dropped it.
  for (std::string& m : pd_end_problems(fr))
    pool.push_back(std::move(m));  // reported with the pool's: both are end-of-run checks
  for (std::string& m : request_count_problems(fr))
    pool.push_back(std::move(m));  // every request read counted once (docs/outputs.md)
  if (!fr.disaggregated)  // every prompt token hit or computed, every recomputation counted
    for (std::string& m : recompute_balance_problems(fr.scheduler.requests,
                                                     fr.scheduler.recomputed_tokens))
      pool.push_back(std::move(m));
  result.invariant_violations += pool.size();
  if (!pool.empty() && result.first_violation.empty())
    result.first_violation = pool.front();
  nlohmann::json& inv = result.summary["invariants"];
  inv["checked"] = inv["checked"].get<uint64_t>() + fr.storage.invariant_checked;
  inv["violations"] = inv["violations"].get<uint64_t>() + pool.size();
  for (const std::string& m : pool)
    inv["messages"].push_back(m);
}

replay_result replay_full(const replay_job& job, const deployment_plan& plan) {
  auto start = clock_type::now();
  std::unique_ptr<run_outputs> outputs = open_outputs(job);
  // A request larger than every instance's device tier is rejected: its blocks are not built.
  uint32_t max_device_blocks = plan.run.cache.device_blocks;
  for (const instance_config& ic : plan.instances)
    max_device_blocks = std::max(max_device_blocks, ic.scheduler.device_blocks);
  auto feed = std::make_shared<trace_feed>(open_traces(job, plan.trace), job.traces,
                                           mapper_of(job, plan), plan.run.block_size,
                                           max_device_blocks, plan.front.time_scale);
  progress_bar progress("replay", feed->merger().bytes_total(), job.progress);
  full_run_options options;
  options.mode = job.backend == copy_backend_kind::cuda ? clock_mode::wall : job.clock;
  options.speed = job.speed;
  options.progress = [&] { progress.update(feed->merger().bytes_read(), feed->read()); };
  options.on_poll = job.on_poll;
  tier_occupancy_sampler occupancy;
  if (plan.timeseries)
    options.occupancy = &occupancy;
  full_result fr = run_full_replay(plan, feed, options);
  progress.finish();
  check_virtual_time(fr);

  run_info run = run_info_of(job, plan);
  run.parse_s = feed->parse_s();
  run.wall_s = seconds_since(start);
  run.trace = feed->totals();
  run.block_bytes = plan.run.block_bytes();
  replay_result result;
  result.summary = full_summary(fr, run, file_infos(job, feed->merger(), feed->per_file()));
  result.summary["kvtier"] = build_info_json();
  result.text = full_text(result.summary, job.out_dir, plan.timeseries);
  add_end_checks(fr, result);
  result.summary["faults"] = faults_summary(fr, plan.storage.pool.faults);
  result.summary["storage"]["pool"] = pool_summary(fr, plan.storage.pool.pool);
  if (plan.storage.pool.faults.any())
    result.text += fault_text(result.summary["faults"]);
  result.drained = fr.drained;
  if (auto w = lag_warning(job, result.summary))
    result.warnings.push_back(*w);
  for (std::string& w : storage_failure_warnings(fr.storage))
    result.warnings.push_back(std::move(w));
  if (outputs) {
    write_full_csv(outputs->csv.out(), fr);
    outputs->commit(result.summary);
  }
  if (outputs && plan.timeseries) {
    atomic_file f(job.out_dir + "/timeseries.csv");
    write_timeseries(f.out(), fr, occupancy);
    f.commit();
  }
  return result;
}

}  // namespace

std::string seeded_draws(const config& cfg) {
  bool faults =
    cfg.is_set(keys::faults::node_loss_at_s) || cfg.is_set(keys::faults::slow_link_at_s);
  for (number_key key : {keys::faults::node_losses_per_hour, keys::faults::slow_links_per_hour,
                         keys::faults::get_fail_probability, keys::faults::put_fail_probability})
    faults = faults || cfg.number(key) > 0;
  std::string draws;
  if (faults)
    draws = "faults.*";
  if (cfg.number(keys::pd::failure_rate) > 0)
    draws += std::string(draws.empty() ? "" : ", ") + "pd.failure_rate";
  workload_variant variant;
  variant.sample_fraction = cfg.number(keys::trace::sample_fraction);
  variant.arrival_jitter_s = cfg.number(keys::trace::arrival_jitter_s);
  variant.session_shift_s = cfg.number(keys::trace::session_shift_s);
  if (variant.any())
    draws += std::string(draws.empty() ? "" : ", ") + "a workload variant (trace.*)";
  return draws;
}

replay_result run_replay_job(const replay_job& job) {
  if (job.traces.empty())
    throw config_error("a replay needs at least one trace");
  if (job.backend == copy_backend_kind::cuda && job.mode != replay_mode::full)
    throw config_error("--backend cuda replays in full mode on the wall clock");
  if (job.verify && job.backend != copy_backend_kind::cuda)
    throw config_error("--verify checks real bytes: it needs --backend cuda");
  deployment_plan plan = resolve_plan(job.cfg, job);  // every config value, once
  return job.mode == replay_mode::hitrate ? replay_hitrate(job, plan) : replay_full(job, plan);
}

}  // namespace kvtier
