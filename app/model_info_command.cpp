// `kvtier model-info`: what the model.*, gpu.* and parallel.* keys derive (KV bytes per token,
// FLOPs) and the step times the configured compute model predicts for single prefills and
// decode batches, as JSON: the predicted columns of docs/models.md's comparison table.

#include <iostream>

#include <nlohmann/json.hpp>

#include "app/commands.hpp"
#include "app/load_config.hpp"
#include "runtime/config/compute_config.hpp"

namespace kvtier {

namespace {

using nlohmann::json;

json step_json(const compute_profile& p, const batch_shape& b) {
  step_cost cost = cost_of(p, b);
  json j = {{"step_ms", static_cast<double>(cost.total_ns()) / 1e6}};
  if (p.model == compute_model::roofline) {
    roofline_parts parts = roofline_of(p.roofline, b);
    j["compute_ms"] = parts.compute_ns / 1e6;
    j["attention_ms"] = parts.attention_ns / 1e6;
    j["memory_ms"] = parts.memory_ns / 1e6;
    j["layer_overhead_ms"] = parts.layer_ns / 1e6;
    j["collective_ms"] = parts.collective_ns / 1e6;
    j["bound"] = parts.compute_bound() ? "compute" : "memory";
  }
  return j;
}

json gpu_json(const gpu_spec& g) {
  return {{"name", g.name},
          {"bf16_tflops", g.bf16_tflops},
          {"fp8_tflops", g.fp8_tflops},
          {"int8_tops", g.int8_tops},
          {"fp4_tflops", g.fp4_tflops},
          {"hbm_gbps", g.hbm_gbps},
          {"hbm_gib", g.hbm_gib},
          {"collective_latency_us", g.collective_latency_us},
          {"collective_mid_gbps", g.collective_mid_gbps},
          {"collective_gbps", g.collective_gbps},
          {"compute_efficiency", g.compute_efficiency},
          {"attention_efficiency", g.attention_efficiency},
          {"memory_efficiency", g.memory_efficiency},
          {"overlap", g.overlap},
          {"step_overhead_us", g.step_overhead_us},
          {"layer_overhead_us", g.layer_overhead_us},
          {"moe_layer_overhead_us", g.moe_layer_overhead_us},
          {"moe_expert_overhead_us", g.moe_expert_overhead_us}};
}

}  // namespace

CLI::App* add_model_info_command(CLI::App& app, model_info_args& args) {
  auto* cmd = app.add_subcommand(
    "model-info", "Print the model's KV bytes and FLOPs per token and predicted step times (JSON)");
  add_config_options(*cmd, args.config);
  cmd->add_option("--prompt", args.prompts, "prefill lengths to predict, tokens (repeatable)");
  cmd->add_option("--batch", args.batches, "decode batch sizes to predict (repeatable)");
  cmd->add_option("--context", args.context, "context of every decoding sequence, tokens");
  return cmd;
}

int run_model_info(const model_info_args& args) {
  config c = load_config(args.config);
  replay_config rc = resolve(c);
  compute_profile profile = resolve_compute(c, rc.spec, rc.parallel);
  json out = {{"model", model_summary(c, rc)}, {"gpu", gpu_json(profile.roofline.gpu)}};
  json prefill = json::array();
  for (uint64_t tokens : args.prompts) {
    batch_shape b;
    b.add_prefill(0, tokens);
    json row = step_json(profile, b);
    row["prompt_tokens"] = tokens;
    prefill.push_back(row);
  }
  json decode = json::array();
  for (uint32_t batch : args.batches) {
    batch_shape b;
    for (uint32_t i = 0; i < batch; ++i)
      b.add_decode(args.context);
    json row = step_json(profile, b);
    row["batch"] = batch;
    row["context_tokens"] = args.context;
    decode.push_back(row);
  }
  out["prefill"] = prefill;
  out["decode"] = decode;
  std::cout << out.dump(2) << '\n';
  return exit_ok;
}

}  // namespace kvtier
