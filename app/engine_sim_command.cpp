#include <algorithm>
#include <chrono>
#include <iostream>

#include "actors/device/engine_device.hpp"
#include "gpu/device_info.hpp"
#include "serve/client/client.hpp"
#include "serve/client/remote_controller.hpp"
#include "serve/server/server.hpp"
#include "serve/server/shared_config.hpp"
#include "serve/wire/call.hpp"
#include "app/commands.hpp"
#include "app/load_config.hpp"
#include "app/validators.hpp"
#include "runtime/config/replay_config.hpp"
#include "sim/driver/replay_driver.hpp"

namespace kvtier {

CLI::App* add_engine_sim_command(CLI::App& app, engine_sim_args& args) {
  auto* cmd = app.add_subcommand(
    "engine-sim", "An engine stand-in: replays a trace closed-loop against kvtier serve, with "
                  "kvtier's scheduler and modelled compute (no tensors)");
  add_config_options(*cmd, args.config);
  cmd->add_option("--connect", args.connect, "the server's ZeroMQ endpoint")
    ->capture_default_str();
  cmd->add_option("--token", args.token, "the server's token, when it has one");
  cmd->add_option("--curve-server-key-file", args.curve_server_key_file,
                  "a file holding the server's CURVE public key: the connection is encrypted "
                  "and goes to that server only (needed for a server off this machine)");
  cmd->add_option("--curve-key-file", args.curve_key_file,
                  "a file holding this engine's CURVE secret key (for a server that admits listed "
                  "keys only); default: a fresh key pair");
  cmd->add_option("--trace", args.traces,
                  "trace file (repeatable). Default: the bundled sample at trace.time_scale=8");
  cmd->add_option("--format", args.format, "trace format")
    ->check(CLI::IsMember({"auto", "mooncake", "azure", "agentic", "native"}));
  cmd->add_option("--out", args.out_dir, "output directory (summary.json, requests.csv)")
    ->capture_default_str();
  cmd->add_option("--speed", args.speed, "virtual seconds per wall second (as the server's)")
    ->check(finite_positive())
    ->capture_default_str();
  cmd->add_option("--name", args.name, "the engine's name in hello")->capture_default_str();
  cmd->add_option("--print-hashes", args.print_hashes,
                  "print the block hashes of these comma-separated token ids at "
                  "cache.block_size, one per line, and exit (no server needed)");
  cmd->add_flag("--quiet", args.quiet, "print nothing on success");
  cmd->add_option("--backend", args.backend,
                  "modelled: modelled compute, no tensors; cuda: KV tensors per layer on the "
                  "GPU, exported to kvtier serve --backend cuda with CUDA IPC, compute emulated "
                  "per layer, each layer waiting on the server's IPC events")
    ->check(CLI::IsMember({"modelled", "cuda"}))
    ->capture_default_str();
  cmd->add_flag("--verify", args.verify,
                "cuda backend: check every swapped-in block's bytes after its layer events "
                "(the server needs --verify); mismatches fail the run");
  cmd->add_option("--event-slots", args.event_slots,
                  "cuda backend: IPC event slots (each one event per layer) the server rotates "
                  "through, one per swap-in")
    ->check(CLI::Range(1, 64))
    ->capture_default_str();
  cmd->add_option("--swap-bench", args.swap_bench_blocks,
                  "cuda backend: instead of a replay, ask the server to load this many host "
                  "blocks into the engine's tensors (bench_swap), print the bandwidth and check "
                  "the blocks after the layer events")
    ->check(CLI::Range(1u, 1u << 24));
  cmd->add_option("--swap-bench-repeats", args.swap_bench_repeats, "repeats of --swap-bench")
    ->check(CLI::Range(1, 1000))
    ->capture_default_str();
  cmd->add_option("--device-owner", args.device_owner,
                  "kvtier: the server's controller allocates device blocks (protocol 1, 2); "
                  "engine: engine-sim's own allocator does, as an engine's KV cache manager, "
                  "and names its block ids to kvtier (protocol 3; with --backend cuda kvtier "
                  "loads into and saves from those blocks of engine-sim's tensors)")
    ->check(CLI::IsMember({"kvtier", "engine"}))
    ->capture_default_str();
  return cmd;
}

namespace {

// bench_swap: the server loads host blocks into this engine's tensors, timed on its device;
// the engine then waits on the slot's layer events in its stream and checks every block.
int run_swap_bench(const engine_sim_args& args, const serve::remote_options& ro,
                   engine_device& gpu) {
  serve::client link(ro.endpoint, ro.token, std::chrono::minutes(5), ro.curve);
  try {
    serve::say_hello(link, ro, ro.engine_name);
    auto t0 = std::chrono::steady_clock::now();
    serve::call ask;
    ask.op = serve::verb::bench_swap;
    ask.blocks = args.swap_bench_blocks;
    ask.repeats = args.swap_bench_repeats;
    serve::bench_swap_answer r = serve::decode_bench_swap_reply(link.call(ask).root());
    const std::vector<gpu::block_pattern>& blocks = r.blocks;
    uint64_t bad = gpu.wait_and_check(r.slot, blocks);
    double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const std::vector<double>& gbps = r.gbps;
    std::vector<double> sorted = gbps;
    std::sort(sorted.begin(), sorted.end());
    double median = sorted.empty() ? 0 : sorted[sorted.size() / 2];
    uint64_t bytes = r.bytes;
    std::cout << "kvtier engine-sim: swap bench: " << args.swap_bench_blocks << " blocks ("
              << bytes << " bytes) into the engine's tensors through CUDA IPC, "
              << gbps.size() << " repeats, device GB/s:";
    for (double g : gbps)
      std::cout << ' ' << g;
    std::cout << "; median " << median << " GB/s; whole call " << wall_s << " s\n"
              << "kvtier engine-sim: swap bench verify: " << blocks.size()
              << " blocks checked after their layer events, " << bad << " mismatches\n";
    serve::call bye;
    bye.op = serve::verb::bye;
    link.call(bye);
    if (bad > 0) {
      std::cerr << "kvtier engine-sim: swapped-in blocks did not hold their bytes; first: "
                << gpu.verified().first << '\n';
      return exit_failure;
    }
    return exit_ok;
  } catch (const serve::remote_error& e) {
    std::cerr << "kvtier engine-sim: the server refused: " << e.what() << '\n';
    return e.kind == "bad_request" || e.kind == "version" || e.kind == "model_mismatch"
                 || e.kind == "config_mismatch"
             ? exit_bad_input : exit_failure;
  }
}


// --print-hashes' comma-separated token ids, each an int32.
std::vector<int32_t> parse_token_ids(const std::string& text) {
  std::vector<int32_t> tokens;
  size_t at = 0;
  while (at <= text.size()) {
    size_t comma = text.find(',', at);
    std::string item = text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    try {
      size_t used = 0;
      long v = std::stol(item, &used);
      if (used != item.size() || v < INT32_MIN || v > INT32_MAX)
        throw std::invalid_argument(item);
      tokens.push_back(static_cast<int32_t>(v));
    } catch (const std::exception&) {
      throw config_error("--print-hashes: '" + item + "' is not a token id (int32)");
    }
    if (comma == std::string::npos)
      break;
    at = comma + 1;
  }
  return tokens;
}

int print_block_hashes(const std::string& token_ids, uint32_t block_size) {
  std::vector<int32_t> tokens = parse_token_ids(token_ids);
  std::vector<cache_block> blocks;
  map_token_blocks(tokens.data(), tokens.size(), block_size, blocks);
  for (const cache_block& b : blocks)
    std::cout << b.hash << '\n';
  return exit_ok;
}

void check_backend_options(const engine_sim_args& args, bool real) {
  if (!real && (args.verify || args.swap_bench_blocks > 0))
    throw config_error(std::string(args.verify ? "--verify" : "--swap-bench")
                       + " works on real tensors: it needs --backend cuda");
  if (real && !gpu::cuda_built())
    throw config_error("--backend cuda: this kvtier was built without CUDA (configure with "
                       "KVTIER_CUDA=ON on a machine with the CUDA toolkit)");
}

serve::remote_options remote_options_of(const engine_sim_args& args, const config& cfg,
                                        const replay_config& rc) {
  serve::remote_options ro;
  ro.endpoint = args.connect;
  ro.token = args.token;
  ro.curve = serve::read_curve_client_keys(args.curve_server_key_file, args.curve_key_file,
                                           "--curve-server-key-file", "--curve-key-file");
  // The server refuses plaintext off loopback (docs/protocol.md, "Encryption"); said here at
  // once rather than as a call that times out.
  if (!ro.curve.on() && !serve::is_local_endpoint(args.connect))
    throw config_error("--connect " + args.connect + " is not on this machine: give "
                       "--curve-server-key-file (the server's CURVE public key; its calls and "
                       "token then travel encrypted); plaintext is for loopback only");
  ro.engine_name = args.name;
  ro.model = rc.model;
  ro.block_size = rc.block_size;
  ro.owner = args.device_owner == "engine" ? serve::device_owner::engine
                                           : serve::device_owner::kvtier;
  ro.device_blocks = rc.cache.device_blocks;
  ro.shared = serve::shared_config(cfg, rc);  // refused at hello unless the server's
  return ro;
}

// The cuda backend's KV tensors, shaped as the config's model and cache.
std::shared_ptr<engine_device> open_engine_device(const engine_sim_args& args,
                                                  const replay_config& rc) {
  engine_device_options eo;
  eo.shape = rc.model;
  eo.block_size = rc.block_size;
  eo.device_blocks = rc.cache.device_blocks;
  eo.event_slots = args.event_slots;
  eo.verify = args.verify;
  return std::make_shared<engine_device>(eo);
}

// A wall-clock replay whose controller is the server, reached through `ro`.
void set_remote_replay(replay_job& job, const engine_sim_args& args,
                       const serve::remote_options& ro) {
  job.traces = args.traces;
  job.format = args.format;
  job.mode = replay_mode::full;
  job.clock = clock_mode::wall;
  job.speed = args.speed;
  job.out_dir = args.out_dir;
  job.progress = !args.quiet;
  job.remote.spawn = [ro](caf::actor_system& sys, const sim_clock& clock) {
    return serve::spawn_remote_controller(sys, ro, clock);
  };
}

// The replay's text, the cuda backend's verify counts and warnings; the exit status.
int report_replay(const engine_sim_args& args, const replay_result& result,
                  const engine_device* gpu) {
  if (!args.quiet)
    std::cout << result.text;
  if (gpu && args.verify) {
    engine_verify_counts v = gpu->verified();
    std::cout << "kvtier engine-sim: verify: " << v.blocks << " blocks of " << v.swap_ins
              << " swap-ins checked after their layer events, " << v.mismatches
              << " mismatches\n";
    if (v.mismatches > 0) {
      std::cerr << "kvtier engine-sim: swapped-in blocks did not hold their bytes; first: "
                << v.first << '\n';
      return exit_failure;
    }
  }
  for (const std::string& w : result.warnings)
    std::cerr << "kvtier: warning: " << w << '\n';
  if (result.failed()) {
    std::cerr << "kvtier engine-sim: the replay failed"
              << (result.first_violation.empty() ? "" : ": " + result.first_violation) << '\n';
    return exit_failure;
  }
  return exit_ok;
}

}  // namespace

int run_engine_sim(const engine_sim_args& in) {
  engine_sim_args args = in;
  std::vector<std::string> under;
  if (args.traces.empty()) {
    args.traces.push_back(default_trace_path());
    under = sample_defaults();
  }
  replay_job job;
  job.cfg = load_config(args.config, under);
  replay_config rc = resolve(job.cfg);
  if (!args.print_hashes.empty())
    return print_block_hashes(args.print_hashes, rc.block_size);
  bool real = args.backend == "cuda";
  check_backend_options(args, real);
  serve::remote_options ro = remote_options_of(args, job.cfg, rc);
  std::shared_ptr<engine_device> gpu;
  if (real) {
    gpu = open_engine_device(args, rc);
    ro.gpu = gpu;
    ro.verify = args.verify;
    if (args.swap_bench_blocks > 0)
      return run_swap_bench(args, ro, *gpu);
    job.remote.compute = gpu;
  }
  set_remote_replay(job, args, ro);
  replay_result result;
  try {
    result = run_replay_job(job);
  } catch (const serve::remote_error& e) {
    std::cerr << "kvtier engine-sim: the server refused: " << e.what() << '\n';
    return e.kind == "model_mismatch" || e.kind == "config_mismatch" || e.kind == "version"
                 || e.kind == "unauthorized" || e.kind == "bad_request"
             ? exit_bad_input : exit_failure;
  }
  return report_replay(args, result, gpu.get());
}

}  // namespace kvtier
