// `kvtier bench emulation`: does the modelled backend predict the real one? The same requests
// replay twice: in virtual time on modelled links loaded with a calibration measured on this GPU
// (`kvtier bench transfer --emit-calibration`), and on the wall clock with real CUDA transfers
// and emulated compute. Each request's swap-in time (its share of the step's swap-in, by blocks)
// is compared, as a distribution, and each link's total; sim/report/emulation_check.hpp holds
// the arithmetic and the targets. With --emit-calibration, the real run's own copies calibrate
// the links (gpu/bench/replay_copy_fit.hpp; docs/gpu.md says when to prefer that to the bench's).

#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>

#include "app/commands.hpp"
#include "app/load_config.hpp"
#include "gpu/bench/replay_copy_fit.hpp"
#include "runtime/config/strict_json.hpp"
#include "sim/full/full_replay.hpp"
#include "sim/full/preloaded_trace.hpp"
#include "core/build_info.hpp"
#include "sim/report/atomic_file.hpp"
#include "sim/report/emulation_check.hpp"

namespace kvtier {

namespace {

using nlohmann::json;

// Per request: its share of every swap-in that loaded blocks for it, and when its first one
// started and how long D2H copies ran beside its swap-ins; totals per direction.
struct transfer_times {
  std::map<request_id, double> swap_in_ns;
  std::map<request_id, uint32_t> swap_in_blocks;
  std::map<request_id, int64_t> start_ns, d2h_overlap_ns;
  double h2d_ns = 0, d2h_ns = 0;
};

transfer_times times_of(const full_result& r) {
  transfer_times t;
  std::map<uint64_t, transfer_log> by_id;
  for (const transfer_log& l : r.engine.log) {
    by_id[l.id] = l;
    if (l.kind == transfer_kind::swap_in)
      t.h2d_ns += static_cast<double>(l.duration_ns);
    else if (is_d2h(l.kind))
      t.d2h_ns += static_cast<double>(l.duration_ns);
  }
  for (const swap_in_log& s : r.controller.swap_ins_by_request) {
    auto it = by_id.find(s.transfer);
    if (it == by_id.end() || it->second.blocks == 0)
      continue;
    const transfer_log& l = it->second;
    t.swap_in_ns[s.req] += static_cast<double>(l.duration_ns) * s.blocks / l.blocks;
    t.swap_in_blocks[s.req] += s.blocks;
    if (!t.start_ns.count(s.req))
      t.start_ns[s.req] = l.start_ns;
    t.d2h_overlap_ns[s.req] += overlap_ns(l, r.engine.log, true);
  }
  return t;
}

void require_clean(const full_result& r, const char* run) {
  if (r.controller.invariant_violations > 0)
    throw std::runtime_error(std::string(run) + " replay: " + r.controller.invariant_messages.front());
  if (!r.drained)
    throw std::runtime_error(std::string(run) + " replay did not finish");
}

/// Every copy of both runs, one line each: the timeline the per-request errors come from.
void write_timeline(const std::string& path, const full_result& predicted,
                    const full_result& measured) {
  atomic_file f(path);
  f.out() << "run,transfer,kind,blocks,start_ms,duration_ms,d2h_overlap_ms,h2d_overlap_ms\n";
  for (const auto* r : {&predicted, &measured}) {
    const char* run = r == &predicted ? "predicted" : "measured";
    for (const transfer_log& l : r->engine.log) {
      char line[200];
      std::snprintf(line, sizeof line, "%s,%llu,%s,%u,%.4f,%.4f,%.4f,%.4f\n", run,
                    static_cast<unsigned long long>(l.id), to_string(l.kind), l.blocks,
                    l.start_ns / 1e6, l.duration_ns / 1e6, overlap_ns(l, r->engine.log, true) / 1e6,
                    overlap_ns(l, r->engine.log, false) / 1e6);
      f.out() << line;
    }
  }
  f.commit();
}

/// Every compute step of both runs: when it was committed, when its layers could begin, when it
/// ended, and what it waited for (the per-step side of the stall comparison).
void write_steps(const std::string& path, const full_result& predicted,
                 const full_result& measured) {
  atomic_file f(path);
  f.out() << "run,step,start_ms,compute_ms,end_ms,swap_in,layer_wait_ms,reuse_wait_ms\n";
  for (const auto* r : {&predicted, &measured}) {
    const char* run = r == &predicted ? "predicted" : "measured";
    for (const step_record& s : r->scheduler.step_log) {
      char line[200];
      std::snprintf(line, sizeof line, "%s,%llu,%.4f,%.4f,%.4f,%llu,%.4f,%.4f\n", run,
                    static_cast<unsigned long long>(s.step), s.start_ns / 1e6,
                    s.compute_ns / 1e6, s.end_ns / 1e6,
                    static_cast<unsigned long long>(s.swap_in), s.layer_wait_ns / 1e6,
                    s.reuse_wait_ns / 1e6);
      f.out() << line;
    }
  }
  f.commit();
}

/// The steps after a swap-in in both runs (matched by step number): what the model had each wait
/// for data in flight, and the stall the GPU measured.
std::vector<gpu::waited_step> waited_steps(const full_result& predicted,
                                           const full_result& measured, int64_t layer_wait_ns,
                                           uint32_t layers) {
  std::map<uint64_t, const step_record*> real;
  for (const step_record& s : measured.scheduler.step_log)
    if (s.swap_in != 0)
      real[s.step] = &s;
  std::vector<gpu::waited_step> out;
  for (const step_record& s : predicted.scheduler.step_log) {
    auto it = real.find(s.step);
    if (s.swap_in == 0 || it == real.end())
      continue;
    double charged = static_cast<double>(layer_wait_ns) * layers;
    out.push_back({static_cast<double>(s.layer_wait_ns) - charged,
                   static_cast<double>(it->second->layer_wait_ns)});
  }
  return out;
}

/// Per step of the real run (matched by step number, both or neither after a swap-in): the
/// blocks of its swap-in and how much longer it took than the model's busy time and its own
/// measured waits explain: the host's time between the commit and the GPU.
std::vector<gpu::step_delay> step_delays(const full_result& predicted,
                                         const full_result& measured) {
  std::map<uint64_t, uint32_t> blocks;
  for (const transfer_log& l : measured.engine.log)
    blocks[l.id] = l.blocks;
  std::map<uint64_t, const step_record*> modelled;
  for (const step_record& s : predicted.scheduler.step_log)
    modelled[s.step] = &s;
  std::vector<gpu::step_delay> out;
  for (const step_record& m : measured.scheduler.step_log) {
    auto it = modelled.find(m.step);
    if (it == modelled.end() || (m.swap_in == 0) != (it->second->swap_in == 0))
      continue;
    const step_record& p = *it->second;
    double busy = static_cast<double>(p.end_ns - p.compute_ns - p.layer_wait_ns);
    double extra = static_cast<double>(m.end_ns - m.compute_ns - m.layer_wait_ns) - busy;
    out.push_back({m.swap_in != 0 ? blocks[m.swap_in] : 0u, extra});
  }
  return out;
}

/// Fits the links to the real run's copies (and the layer wait to its steps) and writes the
/// calibration file `args.calibration_out`; false (nothing written) if the fit is refused.
bool emit_replay_calibration(const bench_emulation_args& args, const replay_config& rc,
                             const deployment_plan& modelled, const full_result& predicted,
                             const full_result& measured) {
  std::vector<gpu::measured_copy> copies;
  for (const transfer_log& l : measured.engine.log) {
    if (l.kind == transfer_kind::swap_in)
      copies.push_back({gpu::transfer_direction::h2d, l.blocks, double(l.duration_ns)});
    else if (is_d2h(l.kind))
      copies.push_back({gpu::transfer_direction::d2h, l.blocks, double(l.duration_ns)});
  }
  gpu::replay_copy_fit fit = gpu::fit_replay_copies(copies, rc.block_bytes(), rc.model.layers);
  std::printf("%s", gpu::format_replay_fit(fit).c_str());
  std::string refused = gpu::replay_fit_refusal(fit);
  if (!refused.empty()) {
    std::fprintf(stderr, "kvtier: no calibration written: %s\n", refused.c_str());
    return false;
  }
  size_t h2d = 0;
  for (const gpu::measured_copy& c : copies)
    h2d += c.direction == gpu::transfer_direction::h2d ? 1 : 0;
  // Where the rates came from: the bench's file keeps the rest (duplex, the layer wait).
  json source = {{"kind", "replay"},
                 {"traces", args.traces},
                 {"device", measured.engine.device},
                 {"base_calibration", args.calibration},
                 {"copies", {{"h2d", h2d}, {"d2h", copies.size() - h2d}}}};
  size_t wait_steps = 0;
  std::optional<double> layer_wait = gpu::fit_layer_wait(
    waited_steps(predicted, measured,
                 modelled.instances.front().scheduler.compute.layer_wait_ns, rc.model.layers),
    rc.model.layers, &wait_steps);
  source["layer_wait_steps"] = wait_steps;
  if (layer_wait)
    std::printf("layer wait: %.2f us per layer (median of %zu steps after a swap-in whose data "
                "the model had in place)\n", *layer_wait / 1e3, wait_steps);
  else
    std::printf("layer wait: %zu steps after a swap-in with the data in place, fewer than %zu: "
                "the base calibration's figure stays\n", wait_steps, gpu::step_fit_steps_min);
  size_t submit_steps = 0;
  std::optional<double> submit =
    gpu::fit_submit_per_block(step_delays(predicted, measured), &submit_steps);
  source["submit_steps"] = submit_steps;
  if (submit)
    std::printf("swap-in submission: %.2f us per block before the step's compute (median of %zu "
                "steps after a swap-in)\n", *submit / 1e3, submit_steps);
  else
    std::printf("swap-in submission: %zu steps after a swap-in, fewer than %zu: the base "
                "calibration's figure stays\n", submit_steps, gpu::step_fit_steps_min);
  json base = read_json_file(args.calibration, "calibration file");
  atomic_file f(args.calibration_out);
  f.out() << gpu::replay_calibration_json(base, fit, source, {layer_wait, submit}).dump(2)
          << '\n';
  f.commit();
  std::printf("calibration (from this run's copies): %s\n", args.calibration_out.c_str());
  return true;
}

json spread_json(const error_spread& s) {
  return {{"count", s.count}, {"p50", s.p50}, {"p90", s.p90}, {"max", s.max}};
}

// The same requests replayed twice: on modelled links in virtual time, and on the real
// backend on the wall clock.
struct emulation_runs {
  deployment_plan modelled;
  full_result predicted, measured;
};

emulation_runs run_both(const bench_emulation_args& args) {
  config cfg = load_config(args.config);
  cfg.set("links.calibration=\"" + args.calibration + "\"");
  emulation_runs runs;
  runs.modelled = resolve_plan(cfg, {});
  preloaded_trace m = preload(args.traces, runs.modelled.run.block_size);

  bool log_steps = !args.steps_out.empty() || !args.calibration_out.empty();
  for (instance_config& ic : runs.modelled.instances) {
    ic.controller.log = true;
    ic.scheduler.log_steps = log_steps;
  }
  runs.predicted = run_full_replay(runs.modelled, feed_of(m), {});
  require_clean(runs.predicted, "modelled");

  run_choices on_gpu;
  on_gpu.backend = copy_backend_kind::cuda;
  on_gpu.verify = !args.no_verify;
  deployment_plan real = resolve_plan(cfg, on_gpu);
  for (instance_config& ic : real.instances)
    ic.scheduler.log_steps = log_steps;
  full_run_options wall;
  wall.mode = clock_mode::wall;
  runs.measured = run_full_replay(real, feed_of(m), wall);
  require_clean(runs.measured, "real");
  return runs;
}

/// Each request's swap-in time in both runs, printed one line each, and their totals.
struct request_comparison {
  json rows = json::array();
  std::vector<double> errors;
  double total_p = 0, total_q = 0;
};

request_comparison compare_requests(transfer_times& p, transfer_times& q,
                                    const std::string& device) {
  request_comparison c;
  std::printf("device: %s\nrequest  blocks  predicted_ms  measured_ms  error  start_ms  "
              "d2h_beside_ms (predicted/measured)\n",
              device.c_str());
  for (const auto& [req, ns] : q.swap_in_ns) {
    auto pi = p.swap_in_ns.find(req);
    if (pi == p.swap_in_ns.end())
      continue;  // the two runs decided differently for this request
    c.total_p += pi->second;
    c.total_q += ns;
    double err = relative_error(pi->second, ns);
    c.errors.push_back(err);
    double po = p.d2h_overlap_ns[req] / 1e6, qo = q.d2h_overlap_ns[req] / 1e6;
    std::printf("%7llu  %6u  %12.3f  %11.3f  %+5.1f%%  %8.1f  %6.3f / %6.3f\n",
                static_cast<unsigned long long>(req), q.swap_in_blocks[req], pi->second / 1e6,
                ns / 1e6, err * 100, q.start_ns[req] / 1e6, po, qo);
    c.rows.push_back({{"request", req}, {"blocks", q.swap_in_blocks[req]},
                      {"predicted_ms", pi->second / 1e6}, {"measured_ms", ns / 1e6},
                      {"measured_start_ms", q.start_ns[req] / 1e6},
                      {"d2h_beside_ms", {{"predicted", po}, {"measured", qo}}}});
  }
  return c;
}

/// Prints each link's totals in both runs; returns them as rows.
json compare_links(const std::vector<link_comparison>& links) {
  json rows = json::array();
  for (const link_comparison& l : links) {
    double e = relative_error(l.predicted_ns, l.measured_ns);
    std::printf("%-17s predicted %9.3f ms, measured %9.3f ms, error %+.1f%%\n", l.name.c_str(),
                l.predicted_ns / 1e6, l.measured_ns / 1e6, e * 100);
    rows.push_back({{"name", l.name}, {"predicted_ms", l.predicted_ns / 1e6},
                    {"measured_ms", l.measured_ns / 1e6}, {"error", e}});
  }
  return rows;
}

}  // namespace

CLI::App* add_bench_emulation_command(CLI::App& bench, bench_emulation_args& args) {
  auto* cmd = bench.add_subcommand(
    "emulation", "Replay a trace on calibrated modelled links (virtual time) and on the real "
                 "CUDA backend (wall clock), and compare transfer times per request and per link");
  add_config_options(*cmd, args.config);
  cmd->add_option("--trace", args.traces, "trace file(s)")->required();
  cmd->add_option("--calibration", args.calibration,
                  "from `kvtier bench transfer --emit-calibration`")
    ->required()
    ->check(CLI::ExistingFile);
  cmd->add_flag("--no-verify", args.no_verify, "do not check the bytes of the real run");
  cmd->add_option("--json", args.json_out, "also write the comparison to this JSON file");
  cmd->add_option("--timeline", args.timeline_out,
                  "also write every copy of both runs (start, duration, overlaps) to this CSV");
  cmd->add_option("--steps", args.steps_out,
                  "also write every compute step of both runs (start, end, waits) to this CSV");
  cmd->add_option("--emit-calibration", args.calibration_out,
                  "also fit the links to the real run's copies and write that calibration "
                  "(the format of `bench transfer --emit-calibration`); exit 1 if the fit misses");
  return cmd;
}

int run_bench_emulation(const bench_emulation_args& args) {
  emulation_runs runs = run_both(args);
  const full_result& predicted = runs.predicted;
  const full_result& measured = runs.measured;
  transfer_times p = times_of(predicted), q = times_of(measured);
  request_comparison c = compare_requests(p, q, measured.engine.device);
  double err = relative_error(c.total_p, c.total_q);
  error_spread spread = spread_of(c.errors);
  std::vector<link_comparison> links = {
    {"h2d", p.h2d_ns, q.h2d_ns},
    {"d2h", p.d2h_ns, q.d2h_ns},
    {"layer-wait stall", static_cast<double>(predicted.scheduler.layer_wait_ns),
     static_cast<double>(measured.scheduler.layer_wait_ns), false},
    {"reuse wait", static_cast<double>(predicted.scheduler.reuse_wait_ns),
     static_cast<double>(measured.scheduler.reuse_wait_ns), false}};
  std::vector<std::string> missed = missed_targets(err, spread, links);
  std::printf("total over %zu requests: predicted %.3f ms, measured %.3f ms, error %+.1f%%\n",
              c.rows.size(), c.total_p / 1e6, c.total_q / 1e6, err * 100);
  std::printf("per request |error|: p50 %.1f%%, p90 %.1f%%, max %.1f%%\n", spread.p50 * 100,
              spread.p90 * 100, spread.max * 100);
  json link_rows = compare_links(links);
  // The real backend's gaps between the layers of steps with no swap-in to wait for: the host's
  // launches, which the model does not charge (docs/gpu.md).
  double gap_ms = static_cast<double>(measured.scheduler.layer_gap_ns) / 1e6;
  std::printf("layer gaps without a swap-in (not modelled): measured %.3f ms over %llu steps\n",
              gap_ms, static_cast<unsigned long long>(measured.scheduler.steps));
  std::printf("targets (total 5%%, p90 per request 10%%, each link 5%%): %s\n",
              missed.empty() ? "all met" : "missed");
  for (const std::string& m : missed)
    std::printf("  missed: %s\n", m.c_str());
  if (!args.timeline_out.empty())
    write_timeline(args.timeline_out, predicted, measured);
  if (!args.steps_out.empty())
    write_steps(args.steps_out, predicted, measured);
  if (!args.json_out.empty()) {
    json out = {{"kvtier_version", build_line()}, {"device", measured.engine.device},
                {"calibration", args.calibration},
                {"requests", c.rows}, {"total_predicted_ms", c.total_p / 1e6},
                {"total_measured_ms", c.total_q / 1e6}, {"error", err},
                {"request_error", spread_json(spread)}, {"links", link_rows},
                {"missed", missed}, {"layer_gap_ms", gap_ms},
                {"swap_in_ms", {{"predicted", p.h2d_ns / 1e6}, {"measured", q.h2d_ns / 1e6}}},
                {"d2h_ms", {{"predicted", p.d2h_ns / 1e6}, {"measured", q.d2h_ns / 1e6}}},
                {"verified", !args.no_verify}};
    atomic_file f(args.json_out);
    f.out() << out.dump(2) << '\n';
    f.commit();
  }
  if (!args.calibration_out.empty()
      && !emit_replay_calibration(args, runs.modelled.run, runs.modelled, predicted, measured))
    return exit_failure;
  return exit_ok;
}

}  // namespace kvtier
