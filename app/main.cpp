// kvtier: models and drives hierarchical KV-cache management for LLM serving.

#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <vector>

#include "app/commands.hpp"
#include "core/build_info.hpp"
#include "runtime/config/options.hpp"
#include "gpu/gpu_error.hpp"
#include "sim/trace/trace_reader.hpp"

#ifndef KVTIER_SOURCE_DIR
#error "KVTIER_SOURCE_DIR must name the source tree (set by CMake)"
#endif

namespace kvtier {

std::string default_trace_path() {
  return source_file("traces/mooncake_conversation_sample.jsonl");
}

std::vector<std::string> sample_defaults() {
  // The sample scenario is a config file (configs/sample.json), so that `--config` with it gives
  // a sweep or a replay of any trace the same load; here its keys, as assignments.
  std::string path = sample_scenario_path();
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (!in || j.is_discarded() || !j.is_object())
    throw config_error(path + ": the sample scenario is missing or not a JSON object");
  std::vector<std::string> out;
  std::function<void(const nlohmann::json&, const std::string&)> add =
    [&](const nlohmann::json& v, const std::string& key) {
      if (v.is_object()) {
        for (auto& [k, x] : v.items())
          add(x, key.empty() ? k : key + "." + k);
      } else {
        out.push_back(key + "=" + (v.is_string() ? v.get<std::string>() : v.dump()));
      }
    };
  add(j, "");
  return out;
}

std::string sample_scenario_path() {
  return source_file("configs/sample.json");
}

std::string source_file(const std::string& relative) {
  return std::string(KVTIER_SOURCE_DIR) + "/" + relative;
}

namespace {

/// One subcommand: what CLI11 parsed it into, and what runs it when it was chosen.
struct command {
  CLI::App* parsed;
  std::function<int()> run;
};

/// Adds one subcommand under `parent`; its arguments live as long as the returned command.
template <class Args>
command add_command(CLI::App& parent, CLI::App* (*add)(CLI::App&, Args&),
                    int (*run)(const Args&)) {
  auto args = std::make_shared<Args>();
  CLI::App* parsed = add(parent, *args);
  return {parsed, [args, run] { return run(*args); }};
}

/// Every subcommand, in the order `kvtier --help` lists them.
std::vector<command> add_commands(CLI::App& app) {
  std::vector<command> commands{
      add_command(app, add_replay_command, run_replay),
      add_command(app, add_config_command, run_config),
      add_command(app, add_model_info_command, run_model_info),
      add_command(app, add_model_fit_command, run_model_fit),
      add_command(app, add_sweep_command, run_sweep),
      add_command(app, add_report_command, run_report),
      add_command(app, add_study_command, run_study),
      add_command(app, add_serve_command, run_serve),
      add_command(app, add_engine_sim_command, run_engine_sim),
  };
  auto* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  commands.push_back(add_command(*bench, add_bench_replay_command, run_bench_replay));
  commands.push_back(add_command(*bench, add_bench_transfer_command, run_bench_transfer));
  commands.push_back(add_command(*bench, add_bench_emulation_command, run_bench_emulation));
  commands.push_back(add_command(*bench, add_bench_storage_command, run_bench_storage));
  commands.push_back(add_command(*bench, add_bench_serve_command, run_bench_serve));
  return commands;
}

/// Runs the chosen subcommand; an error it throws becomes a message and an exit code.
int run_chosen(const std::vector<command>& commands) {
  try {
    for (const auto& c : commands)
      if (*c.parsed)
        return c.run();
  } catch (const config_error& e) {
    std::cerr << "kvtier: bad config: " << e.what() << '\n';
    return exit_bad_input;
  } catch (const trace_error& e) {
    std::cerr << "kvtier: bad trace: " << e.what() << '\n';
    return exit_bad_input;
  } catch (const gpu::gpu_error& e) {
    std::cerr << "kvtier: GPU: " << e.what() << '\n';
    return exit_failure;
  } catch (const std::exception& e) {
    std::cerr << "kvtier: " << e.what() << '\n';
    return exit_failure;
  }
  return exit_failure;
}

}  // namespace
}  // namespace kvtier

int main(int argc, char** argv) {
  CLI::App app{"kvtier: hierarchical KV-cache simulator and controller "
               "(GPU memory -> pinned host memory -> storage)"};
  app.set_version_flag("--version", kvtier::build_line());
  app.require_subcommand(1);
  const auto commands = kvtier::add_commands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kvtier::exit_ok : kvtier::exit_bad_input;
  }
  return kvtier::run_chosen(commands);
}
