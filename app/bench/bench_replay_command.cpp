// `kvtier bench replay`: how fast the hit-rate replay runs, phase by phase. Parsing, block
// hashing and cache operations are timed separately on the same requests; a plain hash-set
// prefix lookup over the same blocks is the baseline measured in the same run.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <unordered_set>

#include "app/commands.hpp"
#include "app/load_config.hpp"
#include "app/validators.hpp"
#include "core/build_info.hpp"
#include "runtime/config/replay_config.hpp"
#include "sim/full/full_replay.hpp"
#include "sim/full/preloaded_trace.hpp"
#include "sim/hitrate/hitrate_replay.hpp"
#include "sim/report/atomic_file.hpp"
#include "sim/report/hitrate_report.hpp"
#include "sim/request_blocks.hpp"
#include "sim/trace/trace_reader.hpp"

namespace kvtier {

namespace {

using clock_type = std::chrono::steady_clock;
using nlohmann::json;

double since(clock_type::time_point t) {
  return std::chrono::duration<double>(clock_type::now() - t).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct cache_run {
  std::string name;
  double seconds = 0;
  double cpu_seconds = 0;  ///< the process's CPU time: what a loaded machine inflates far less
  uint64_t ops = 0;
  double hit_ratio_blocks = 0;
};

cache_run time_replay(const std::string& name, const preloaded_trace& t, const replay_config& rc,
                      uint32_t repeat) {
  std::vector<double> times, cpu;
  cache_run run{name};
  for (uint32_t k = 0; k < repeat; ++k) {
    hitrate_replay replay(rc, 0);
    request_outcome outcome;
    auto start = clock_type::now();
    std::clock_t cpu_start = std::clock();
    for (size_t i = 0; i < t.requests.size(); ++i)
      replay.process(t.requests[i], t.blocks[i], outcome);
    times.push_back(since(start));
    cpu.push_back(static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC);
    if (!replay.finish().ok())
      throw std::runtime_error("invariant violation in benchmark replay " + name);
    const hitrate_totals& tot = replay.totals();
    run.ops = tot.operations();
    uint64_t hits = 0;
    for (tier t : all_tiers)
      hits += at(tot.hit_blocks, t);
    run.hit_ratio_blocks = ratio(hits, tot.blocks);
  }
  run.seconds = median(times);
  run.cpu_seconds = median(cpu);
  return run;
}

// The baseline: infinite capacity, prefix hits via a plain std::unordered_set of block hashes.
cache_run time_baseline(const preloaded_trace& t, uint32_t repeat) {
  std::vector<double> times, cpu;
  cache_run run{"baseline: std::unordered_set prefix lookup, unbounded"};
  for (uint32_t k = 0; k < repeat; ++k) {
    std::unordered_set<block_hash> seen;
    uint64_t hits = 0, ops = 0;
    auto start = clock_type::now();
    std::clock_t cpu_start = std::clock();
    for (const auto& blocks : t.blocks) {
      size_t i = 0;
      while (i < blocks.size() && seen.count(blocks[i].hash)) {
        ++i;
        ++ops;
      }
      ops += i < blocks.size();
      hits += i;
      for (const auto& b : blocks)
        seen.insert(b.hash);
      ops += blocks.size();
    }
    times.push_back(since(start));
    cpu.push_back(static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC);
    run.ops = ops;
    run.hit_ratio_blocks = ratio(hits, t.block_count);
  }
  run.seconds = median(times);
  run.cpu_seconds = median(cpu);
  return run;
}

struct full_run {
  double seconds = 0;
  double cpu_seconds = 0;  ///< the process's CPU time: what a loaded machine does not inflate
  size_t instances = 1;
  double virtual_s = 0;
  uint64_t messages = 0;
  uint64_t steps = 0;
  uint64_t violations = 0;
};

// The timed replay of the same requests (already parsed and hashed), four actors included.
full_run time_full(const preloaded_trace& t, const config& cfg, uint32_t repeat) {
  deployment_plan timed = resolve_plan(cfg, {});
  std::vector<double> times, cpu;
  full_run run;
  for (uint32_t k = 0; k < repeat; ++k) {
    auto start = clock_type::now();
    std::clock_t cpu_start = std::clock();
    full_result r = run_full_replay(timed, feed_of(t), {});
    times.push_back(since(start));
    cpu.push_back(static_cast<double>(std::clock() - cpu_start) / CLOCKS_PER_SEC);
    run.virtual_s = static_cast<double>(r.last_event_ns) / 1e9;
    run.instances = std::max<size_t>(1, r.instances.size());
    run.messages = r.messages;
    run.steps = r.scheduler.steps;
    run.violations = r.controller.invariant_violations;
    if (!r.drained || run.violations > 0)
      throw std::runtime_error("the benchmark's timed replay did not finish cleanly");
  }
  run.seconds = median(times);
  run.cpu_seconds = median(cpu);
  return run;
}

}  // namespace

CLI::App* add_bench_replay_command(CLI::App& bench, bench_replay_args& args) {
  auto* cmd = bench.add_subcommand(
    "replay", "Time replays: parse, block hashing and cache operations (hit-rate mode) "
    "separately, then the timed replay (full mode)");
  add_config_options(*cmd, args.config);
  cmd->add_option("--trace", args.traces, "trace file(s) to replay")->required();
  cmd->add_option("--repeat", args.repeat, "runs per measurement (the median is reported)")
    ->check(unsigned_in_range(std::numeric_limits<uint32_t>::max()))
    ->capture_default_str();
  cmd->add_option("--json", args.json_out, "also write the figures to this JSON file");
  cmd->add_flag("--no-full", args.skip_full, "skip the timed (full mode) replays");
  cmd->add_option("--cluster", args.cluster_instances,
                  "mixed instances of the cluster replay timed after the single one (1: none)")
    ->check(CLI::Range(1, 1024))
    ->capture_default_str();
  cmd->add_flag("--pd", args.pd,
                "also time a prefill/decode pair (one prefill and one decode instance, direct "
                "handoff) on the same requests");
  return cmd;
}

namespace {

// The single instance, then the same requests on a cluster of mixed instances (round robin)
// and, with --pd, a prefill/decode pair: each timed per simulated instance-hour, the cluster and
// the pair against the single instance. Printed, and added to `out` under their names.
void time_deployments(const bench_replay_args& args, const preloaded_trace& t, const config& cfg,
                      json& out) {
  config cluster_cfg = cfg;
  cluster_cfg.set("cluster.instances=[{\"role\": \"mixed\", \"count\": "
                  + std::to_string(args.cluster_instances) + "}]");
  cluster_cfg.set("router.policy=round_robin");
  std::vector<std::pair<std::string, full_run>> fulls;
  fulls.emplace_back("full", time_full(t, cfg, args.repeat));
  if (args.cluster_instances > 1)
    fulls.emplace_back("cluster", time_full(t, cluster_cfg, args.repeat));
  if (args.pd) {
    config pd_cfg = cfg;
    pd_cfg.set(R"(cluster.instances=[{"role": "prefill"}, {"role": "decode"}])");
    fulls.emplace_back("pd", time_full(t, pd_cfg, args.repeat));
  }
  double single_per_hour = 0, single_cpu_per_hour = 0;
  for (const auto& [name, f] : fulls) {
    double instance_hours = f.virtual_s * static_cast<double>(f.instances) / 3600.0;
    double per_hour = instance_hours > 0 ? f.seconds / instance_hours : 0;
    double cpu_per_hour = instance_hours > 0 ? f.cpu_seconds / instance_hours : 0;
    if (name == "full") {
      single_per_hour = per_hour;
      single_cpu_per_hour = cpu_per_hour;
    }
    std::printf("%-8s %8.3f s  %zu instance(s)  %.1f virtual s  %.3f wall s per instance-hour"
                "  %llu messages (%.2f M/s)  %llu steps\n",
                (name + ":").c_str(), f.seconds, f.instances, f.virtual_s, per_hour,
                static_cast<unsigned long long>(f.messages),
                static_cast<double>(f.messages) / f.seconds / 1e6,
                static_cast<unsigned long long>(f.steps));
    out[name] = {{"seconds", f.seconds}, {"instances", f.instances}, {"virtual_s", f.virtual_s},
                 {"virtual_s_per_wall_s", f.virtual_s / f.seconds},
                 {"wall_s_per_instance_hour", per_hour}, {"cpu_s", f.cpu_seconds},
                 {"cpu_s_per_instance_hour", cpu_per_hour}, {"messages", f.messages},
                 {"messages_per_s", static_cast<double>(f.messages) / f.seconds},
                 {"steps", f.steps}};
    if (name != "full" && single_per_hour > 0)
      std::printf("         %s / single time per instance-hour: %.2fx wall, %.2fx CPU "
                  "(target at most 1.2x)\n",
                  name.c_str(), per_hour / single_per_hour,
                  single_cpu_per_hour > 0 ? cpu_per_hour / single_cpu_per_hour : 0.0);
  }
}

}  // namespace

int run_bench_replay(const bench_replay_args& args) {
  config cfg = load_config(args.config);
  replay_config rc = resolve(cfg);
  preloaded_trace t = preload(args.traces, rc.block_size);

  replay_config unbounded = rc;
  unbounded.cache.device_blocks = 0xffffffffu;
  unbounded.cache.host_blocks = 0;
  unbounded.storage_blocks = 0;
  unbounded.cache.storage_tier = false;
  std::vector<cache_run> runs;
  runs.push_back(time_baseline(t, args.repeat));
  runs.push_back(time_replay("kvtier model, device only, unbounded", t, unbounded, args.repeat));
  runs.push_back(time_replay("kvtier model, configured tiers", t, rc, args.repeat));

  std::printf("kvtier: %s\n", build_line().c_str());
  std::printf("trace: %zu requests, %llu blocks of %u tokens\n", t.requests.size(),
              static_cast<unsigned long long>(t.block_count), rc.block_size);
  std::printf("parse:   %8.3f s  (%.0f requests/s)\n", t.parse_s,
              static_cast<double>(t.requests.size()) / t.parse_s);
  std::printf("hashing: %8.3f s  (%.1f M blocks/s)\n", t.map_s,
              static_cast<double>(t.block_count) / t.map_s / 1e6);
  json out = {{"kvtier_version", build_line()},
              {"requests", t.requests.size()}, {"blocks", t.block_count},
              {"block_size", rc.block_size}, {"parse_s", t.parse_s}, {"hash_s", t.map_s},
              {"cache", json::array()}};
  const cache_run& base = runs.front();
  for (const auto& r : runs) {
    double mops = static_cast<double>(r.ops) / r.seconds / 1e6;
    // Operations per second against the same-run baseline's, by wall and by CPU time.
    double vs_wall = mops / (static_cast<double>(base.ops) / base.seconds / 1e6);
    double vs_cpu = r.cpu_seconds > 0 && base.cpu_seconds > 0
                      ? (static_cast<double>(r.ops) / r.cpu_seconds)
                          / (static_cast<double>(base.ops) / base.cpu_seconds)
                      : 0.0;
    std::printf("cache:   %8.3f s  %6.1f M block lookups+inserts/s  %.2fx baseline (CPU %.3f s: "
                "%.2fx)  hit ratio %.4f  %s\n",
                r.seconds, mops, vs_wall, r.cpu_seconds, vs_cpu, r.hit_ratio_blocks,
                r.name.c_str());
    out["cache"].push_back({{"name", r.name}, {"seconds", r.seconds}, {"cpu_s", r.cpu_seconds},
                            {"ops", r.ops}, {"mops_per_s", mops},
                            {"vs_baseline_wall", vs_wall}, {"vs_baseline_cpu", vs_cpu},
                            {"hit_ratio_blocks", r.hit_ratio_blocks}});
  }
  if (!args.skip_full)
    time_deployments(args, t, cfg, out);
  if (!args.json_out.empty()) {
    atomic_file f(args.json_out);
    f.out() << out.dump(2) << '\n';
    f.commit();
  }
  return exit_ok;
}

}  // namespace kvtier
