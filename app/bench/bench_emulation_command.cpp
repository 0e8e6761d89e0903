// `kvtier bench emulation`: does the modelled backend predict the real one? The same requests
// replay twice: in virtual time on modelled links loaded with a calibration measured on this GPU
// (`kvtier bench transfer --emit-calibration`), and on the wall clock with real CUDA transfers
// and emulated compute. Each request's swap-in time (its share of the step's swap-in, by blocks)
// is compared, and the totals.

#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>

#include "app/commands.hpp"
#include "app/load_config.hpp"
#include "sim/full/full_replay.hpp"
#include "sim/full/preloaded_trace.hpp"
#include "sim/report/atomic_file.hpp"

namespace kvtier {

namespace {

using nlohmann::json;

// Per request: its share of every swap-in that loaded blocks for it; and totals per direction.
struct transfer_times {
  std::map<request_id, double> swap_in_ns;
  std::map<request_id, uint32_t> swap_in_blocks;
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
    t.swap_in_ns[s.req] += static_cast<double>(it->second.duration_ns) * s.blocks
                           / it->second.blocks;
    t.swap_in_blocks[s.req] += s.blocks;
  }
  return t;
}

void require_clean(const full_result& r, const char* run) {
  if (r.controller.invariant_violations > 0)
    throw std::runtime_error(std::string(run) + " replay: " + r.controller.invariant_messages.front());
  if (!r.drained)
    throw std::runtime_error(std::string(run) + " replay did not finish");
}

}  // namespace

CLI::App* add_bench_emulation_command(CLI::App& bench, bench_emulation_args& args) {
  auto* cmd = bench.add_subcommand(
    "emulation", "Replay a trace on calibrated modelled links (virtual time) and on the real "
                 "CUDA backend (wall clock), and compare transfer times per request");
  add_config_options(*cmd, args.config);
  cmd->add_option("--trace", args.traces, "trace file(s)")->required();
  cmd->add_option("--calibration", args.calibration,
                  "from `kvtier bench transfer --emit-calibration`")
    ->required()
    ->check(CLI::ExistingFile);
  cmd->add_flag("--no-verify", args.no_verify, "do not check the bytes of the real run");
  cmd->add_option("--json", args.json_out, "also write the comparison to this JSON file");
  return cmd;
}

int run_bench_emulation(const bench_emulation_args& args) {
  config cfg = load_config(args.config);
  cfg.set("links.calibration=\"" + args.calibration + "\"");
  replay_config rc = resolve(cfg);
  preloaded_trace m = preload(args.traces, rc.block_size);

  timed_config modelled = resolve_timed(cfg, rc);
  modelled.controller.log = true;
  full_result predicted = run_full_replay(modelled, feed_of(m), {});
  require_clean(predicted, "modelled");

  timed_config real = resolve_timed(cfg, rc);
  use_cuda_backend(real, rc, !args.no_verify);
  full_run_options wall;
  wall.mode = clock_mode::wall;
  full_result measured = run_full_replay(real, feed_of(m), wall);
  require_clean(measured, "real");

  transfer_times p = times_of(predicted), q = times_of(measured);
  json rows = json::array();
  double total_p = 0, total_q = 0;
  std::printf("device: %s\nrequest  blocks  predicted_ms  measured_ms  error\n",
              measured.engine.device.c_str());
  for (const auto& [req, ns] : q.swap_in_ns) {
    auto pi = p.swap_in_ns.find(req);
    if (pi == p.swap_in_ns.end())
      continue;  // the two runs decided differently for this request
    total_p += pi->second;
    total_q += ns;
    double err = (pi->second - ns) / ns;
    std::printf("%7llu  %6u  %12.3f  %11.3f  %+5.1f%%\n", static_cast<unsigned long long>(req),
                q.swap_in_blocks[req], pi->second / 1e6, ns / 1e6, err * 100);
    rows.push_back({{"request", req}, {"blocks", q.swap_in_blocks[req]},
                    {"predicted_ms", pi->second / 1e6}, {"measured_ms", ns / 1e6}});
  }
  double err = total_q > 0 ? (total_p - total_q) / total_q : 0;
  std::printf("total over %zu requests: predicted %.3f ms, measured %.3f ms, error %+.1f%% (%s)\n",
              rows.size(), total_p / 1e6, total_q / 1e6, err * 100,
              std::abs(err) <= 0.10 ? "within 10%" : "NOT within 10%");
  std::printf("all swap-ins: predicted %.3f ms, measured %.3f ms; all D2H: predicted %.3f ms, "
              "measured %.3f ms; layer-wait stall: predicted %.3f ms, measured %.3f ms\n",
              p.h2d_ns / 1e6, q.h2d_ns / 1e6, p.d2h_ns / 1e6,
              q.d2h_ns / 1e6, predicted.scheduler.layer_wait_ns / 1e6,
              measured.scheduler.layer_wait_ns / 1e6);
  if (!args.json_out.empty()) {
    json out = {{"device", measured.engine.device}, {"calibration", args.calibration},
                {"requests", rows}, {"total_predicted_ms", total_p / 1e6},
                {"total_measured_ms", total_q / 1e6}, {"error", err},
                {"swap_in_ms", {{"predicted", p.h2d_ns / 1e6}, {"measured", q.h2d_ns / 1e6}}},
                {"d2h_ms", {{"predicted", p.d2h_ns / 1e6}, {"measured", q.d2h_ns / 1e6}}},
                {"verified", !args.no_verify}};
    atomic_file f(args.json_out);
    f.out() << out.dump(2) << '\n';
    f.commit();
  }
  return exit_ok;
}

}  // namespace kvtier
