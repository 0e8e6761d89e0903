#include <iostream>

#include "serve/client.hpp"
#include "serve/remote_controller.hpp"
#include "sim/cli/commands.hpp"
#include "sim/cli/load_config.hpp"
#include "sim/cli/validators.hpp"
#include "sim/config/replay_config.hpp"
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
  return cmd;
}

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
  if (!args.print_hashes.empty()) {
    std::vector<int32_t> tokens;
    std::string text = args.print_hashes;
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
    std::vector<cache_block> blocks;
    map_token_blocks(tokens.data(), tokens.size(), rc.block_size, blocks);
    for (const cache_block& b : blocks)
      std::cout << b.hash << '\n';
    return exit_ok;
  }
  serve::remote_options ro;
  ro.endpoint = args.connect;
  ro.token = args.token;
  ro.engine_name = args.name;
  ro.model_name = rc.model.name;
  ro.layers = rc.model.layers;
  ro.kv_heads = rc.model.kv_heads;
  ro.head_dim = rc.model.head_dim;
  ro.kv_dtype = rc.model.kv_dtype;
  ro.block_size = rc.block_size;
  job.traces = args.traces;
  job.format = args.format;
  job.mode = replay_mode::full;
  job.wall_clock = true;
  job.speed = args.speed;
  job.out_dir = args.out_dir;
  job.progress = !args.quiet;
  job.remote_controller = [ro](caf::actor_system& sys, const sim_clock& clock) {
    return serve::spawn_remote_controller(sys, ro, clock);
  };
  replay_result result;
  try {
    result = run_replay_job(job);
  } catch (const serve::remote_error& e) {
    std::cerr << "kvtier engine-sim: the server refused: " << e.what() << '\n';
    return e.kind == "model_mismatch" || e.kind == "version" || e.kind == "unauthorized"
             ? exit_bad_input : exit_failure;
  }
  if (!args.quiet)
    std::cout << result.text;
  for (const std::string& w : result.warnings)
    std::cerr << "kvtier: warning: " << w << '\n';
  if (result.failed()) {
    std::cerr << "kvtier engine-sim: the replay failed"
              << (result.first_violation.empty() ? "" : ": " + result.first_violation) << '\n';
    return exit_failure;
  }
  return exit_ok;
}

}  // namespace kvtier
