// kvtier: models and drives hierarchical KV-cache management for LLM serving.

#include <fstream>
#include <functional>
#include <iostream>

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

}  // namespace kvtier

int main(int argc, char** argv) {
  using namespace kvtier;
  CLI::App app{"kvtier: hierarchical KV-cache simulator and controller "
               "(GPU memory -> pinned host memory -> storage)"};
  app.set_version_flag("--version", build_line());
  app.require_subcommand(1);
  replay_args replay;
  auto* replay_cmd = add_replay_command(app, replay);
  config_args config_only;
  auto* config_cmd = add_config_command(app, config_only);
  model_info_args model_info;
  auto* model_info_cmd = add_model_info_command(app, model_info);
  sweep_args sweep;
  auto* sweep_cmd = add_sweep_command(app, sweep);
  report_args report;
  auto* report_cmd = add_report_command(app, report);
  study_args study;
  auto* study_cmd = add_study_command(app, study);
  serve_args serve;
  auto* serve_cmd = add_serve_command(app, serve);
  engine_sim_args engine_sim;
  auto* engine_sim_cmd = add_engine_sim_command(app, engine_sim);
  auto* bench = app.add_subcommand("bench", "Benchmarks");
  bench->require_subcommand(1);
  bench_replay_args bench_replay;
  auto* bench_replay_cmd = add_bench_replay_command(*bench, bench_replay);
  bench_transfer_args bench_transfer;
  auto* bench_transfer_cmd = add_bench_transfer_command(*bench, bench_transfer);
  bench_emulation_args bench_emulation;
  auto* bench_emulation_cmd = add_bench_emulation_command(*bench, bench_emulation);
  bench_storage_args bench_storage;
  auto* bench_storage_cmd = add_bench_storage_command(*bench, bench_storage);
  bench_serve_args bench_serve;
  auto* bench_serve_cmd = add_bench_serve_command(*bench, bench_serve);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? exit_ok : exit_bad_input;
  }
  try {
    if (*replay_cmd)
      return run_replay(replay);
    if (*serve_cmd)
      return run_serve(serve);
    if (*engine_sim_cmd)
      return run_engine_sim(engine_sim);
    if (*config_cmd)
      return run_config(config_only);
    if (*model_info_cmd)
      return run_model_info(model_info);
    if (*sweep_cmd)
      return run_sweep(sweep);
    if (*report_cmd)
      return run_report(report);
    if (*study_cmd)
      return run_study(study);
    if (*bench_replay_cmd)
      return run_bench_replay(bench_replay);
    if (*bench_transfer_cmd)
      return run_bench_transfer(bench_transfer);
    if (*bench_emulation_cmd)
      return run_bench_emulation(bench_emulation);
    if (*bench_serve_cmd)
      return run_bench_serve(bench_serve);
    if (*bench_storage_cmd)
      return run_bench_storage(bench_storage);
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
