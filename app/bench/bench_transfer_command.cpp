// `kvtier bench transfer`: real block transfers on the CUDA device (gpu/bench/transfer_bench.hpp), and
// the calibration file that makes the modelled links match them.

#include <cstdio>
#include <iostream>
#include <sstream>

#include "gpu/bench/transfer_bench.hpp"
#include "app/commands.hpp"
#include "app/load_config.hpp"
#include "app/validators.hpp"
#include "runtime/config/replay_config.hpp"
#include "core/build_info.hpp"
#include "sim/report/atomic_file.hpp"

namespace kvtier {

CLI::App* add_bench_transfer_command(CLI::App& bench, bench_transfer_args& args) {
  auto* cmd = bench.add_subcommand(
    "transfer", "Time KV block transfers between the GPU and pinned host memory, per method, "
                "against the link's bulk speed in the same run (needs a CUDA device)");
  add_config_options(*cmd, args.config);
  cmd->add_option("--block-sizes", args.block_sizes, "tokens per block")
    ->delimiter(',')
    ->check(unsigned_in_range(std::numeric_limits<uint32_t>::max()))
    ->capture_default_str();
  cmd->add_option("--gib", args.gib, "bytes per transfer, GiB")
    ->check(finite_positive())
    ->capture_default_str();
  cmd->add_option("--repetitions", args.repetitions, "timed runs per figure (median)")
    ->check(unsigned_in_range(std::numeric_limits<uint32_t>::max()))
    ->capture_default_str();
  cmd->add_option("--idle-gap-ms", args.idle_gap_ms,
                  "the calibration sweep also times each size after this long with the link "
                  "idle, as a replay's isolated copies run (0: not)")
    ->check(unsigned_in_range(60'000))
    ->capture_default_str();
  cmd->add_option("--conditions", args.condition_sizes,
                  "also time the default method's copies of these sizes (blocks) under each "
                  "condition a replay has and the sweep lacks: completion callbacks, scattered "
                  "host ids, compute submitted from another thread, device ids in runs, and all "
                  "together; each against a baseline copy as the sweep times it")
    ->delimiter(',')
    ->check(unsigned_in_range(std::numeric_limits<uint32_t>::max()))
    ->check(finite_positive());
  cmd->add_option("--sweep-conditions", args.sweep_conditions,
                  "what the calibration sweep's fit goes through: 'replay' (D2H sizes also "
                  "timed under a replay's conditions, as --conditions' replay-like row, which "
                  "a replay's backups match; H2D the bench's own copies, which its swap-ins "
                  "match) or 'bench' (the bench's own copies in both directions)")
    ->check(CLI::IsMember({"replay", "bench"}))
    ->capture_default_str();
  cmd->add_flag("--no-verify", args.no_verify, "skip the byte-for-byte check of each method");
  cmd->add_option("--json", args.json_out, "also write every figure to this JSON file");
  cmd->add_option("--emit-calibration", args.calibration_out,
                  "write the modelled links' calibration (load it with "
                  "--set links.calibration=FILE)");
  cmd->add_option("--calibration-block-size", args.calibration_block_size,
                  "which measured block size the calibration describes (default: "
                  "cache.block_size if measured, else the largest)")
    ->check(unsigned_in_range(std::numeric_limits<uint32_t>::max()));
  return cmd;
}

int run_bench_transfer(const bench_transfer_args& args) {
  replay_config rc = resolve(load_config(args.config));
  gpu::bench_options o;
  o.block_sizes = args.block_sizes;
  o.shape = rc.model;
  o.transfer_bytes = static_cast<uint64_t>(args.gib * double(1ull << 30));
  o.repetitions = args.repetitions;
  o.verify = !args.no_verify;
  o.idle_gap_ms = args.idle_gap_ms;
  o.condition_sizes = args.condition_sizes;
  o.sweep = args.sweep_conditions == "bench" ? gpu::sweep_conditions::bench
                                             : gpu::sweep_conditions::replay_like;
  gpu::device_info device = gpu::query_device();
  if (!device.available) {
    std::cerr << "kvtier: skipped: no CUDA device (" << device.reason << ")\n";
    return exit_failure;
  }
  gpu::bench_report report = gpu::run_transfer_bench(o, &std::cerr);
  std::cout << gpu::format_bench_table(report);
  {
    // The emulated compute of `replay --backend cuda` rests on this fit of the busy kernel.
    gpu::kv_cache_config small;
    small.shape = o.shape;  // and the default block size: the fit does not depend on it
    small.device_blocks = 4;
    small.host_blocks = 4;
    small.calibrate_compute = false;
    gpu::compute_calibration cal = gpu::make_kv_cache(small)->calibrate_compute();
    report.compute = cal;
    std::printf("compute emulation: a layer asked to take t ns takes %.0f ns + %.4f t; "
                "timer tick %.0f ns; worst error %.2f%% (t >= 20 us); a layer waiting on a "
                "copy event loses %.1f us (%.1f us if the event passed before the wait was "
                "submitted)\n",
                cal.overhead_ns, cal.scale, cal.timer_tick_ns, 100 * cal.max_error,
                cal.layer_wait_ns / 1e3, cal.layer_wait_passed_ns / 1e3);
  }
  auto missed = gpu::missed_targets(report);
  std::cout << (missed.empty() ? "targets: all met\n" : "targets missed:\n");
  for (const auto& m : missed)
    std::cout << "  " << m << "\n";
  if (!args.json_out.empty()) {
    atomic_file f(args.json_out);
    nlohmann::json j = gpu::bench_to_json(report);
    j["kvtier_version"] = build_line();
    f.out() << j.dump(2) << '\n';
    f.commit();
  }
  if (!args.calibration_out.empty()) {
    uint32_t bs = args.calibration_block_size;
    if (bs == 0) {
      for (uint32_t s : args.block_sizes)
        bs = std::max(bs, s);
      for (uint32_t s : args.block_sizes)
        if (s == rc.block_size)
          bs = s;
    }
    std::string refused = gpu::calibration_refusal(report, bs);
    if (!refused.empty()) {
      std::cerr << "kvtier: no calibration written: " << refused << "\n";
      return exit_failure;
    }
    atomic_file f(args.calibration_out);
    f.out() << gpu::calibration_json(report, bs).dump(2) << '\n';
    f.commit();
    std::cout << "calibration (" << bs << "-token blocks): " << args.calibration_out << "\n";
  }
  return exit_ok;
}

}  // namespace kvtier
