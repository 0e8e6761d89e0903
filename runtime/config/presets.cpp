#include "runtime/config/presets.hpp"

#include <map>
#include <string>

namespace kvtier {

namespace {

using nlohmann::json;

// One row per model: figures from its config.json on Hugging Face (docs/models.md lists each
// source). params_b is the parameter count the model card states.
json model_row(const char* name, double params_b, json active_params_b, int layers, int hidden,
               int heads, int kv_heads, int head_dim, int kv_lora_rank, int rope_head_dim,
               int experts, int active_experts, const char* weight_dtype) {
  return json{{"model.name", name},
              {"model.params_b", params_b},
              {"model.active_params_b", active_params_b},
              {"model.layers", layers},
              {"model.hidden_size", hidden},
              {"model.attention_heads", heads},
              {"model.kv_heads", kv_heads},
              {"model.head_dim", head_dim},
              {"model.kv_lora_rank", kv_lora_rank},
              {"model.rope_head_dim", rope_head_dim},
              {"model.experts", experts},
              {"model.active_experts", active_experts},
              {"model.kv_dtype", "bf16"},
              {"model.weight_dtype", weight_dtype},
              {"compute.model", "roofline"}};
}

const std::map<std::string, json>& models() {
  static const std::map<std::string, json> table = {
    {"llama2-7b", model_row("llama2-7b", 6.74, nullptr, 32, 4096, 32, 32, 128, 0, 0, 0, 0, "bf16")},
    {"llama2-13b",
     model_row("llama2-13b", 13.0, nullptr, 40, 5120, 40, 40, 128, 0, 0, 0, 0, "bf16")},
    {"llama2-70b",
     model_row("llama2-70b", 69.0, nullptr, 80, 8192, 64, 8, 128, 0, 0, 0, 0, "bf16")},
    {"llama3-8b", model_row("llama3-8b", 8.03, nullptr, 32, 4096, 32, 8, 128, 0, 0, 0, 0, "bf16")},
    {"llama3-70b",
     model_row("llama3-70b", 70.6, nullptr, 80, 8192, 64, 8, 128, 0, 0, 0, 0, "bf16")},
    {"qwen2.5-7b",
     model_row("qwen2.5-7b", 7.61, nullptr, 28, 3584, 28, 4, 128, 0, 0, 0, 0, "bf16")},
    {"qwen3-8b", model_row("qwen3-8b", 8.19, nullptr, 36, 4096, 32, 8, 128, 0, 0, 0, 0, "bf16")},
    {"mixtral-8x7b",
     model_row("mixtral-8x7b", 46.7, 12.9, 32, 4096, 32, 8, 128, 0, 0, 8, 2, "bf16")},
    {"qwen3-235b-a22b",
     model_row("qwen3-235b-a22b", 235, 22, 94, 4096, 64, 4, 128, 0, 0, 128, 8, "bf16")},
    // MLA: head_dim is qk_nope_head_dim (= v_head_dim); weights ship in FP8.
    {"deepseek-v3",
     model_row("deepseek-v3", 671, 37, 61, 7168, 128, 128, 128, 512, 64, 256, 8, "fp8")},
  };
  return table;
}

// One GPU: data-sheet figures (dense, no sparsity; bandwidths per direction), what NCCL reaches
// between two of them, and the factors kvtier model-fit fits (docs/models.md gives each
// figure's source; the model-fit check fails when these differ from its fit).
struct gpu_figures {
  const char* name;
  double bf16, fp8, int8, fp4;                // peak dense TFLOPS (TOPS for int8)
  double hbm_gbps, hbm_gib, host_link, nvlink, rdma;
  double collective_latency_us, collective_mid_gbps, collective_gbps;
  double compute_eff, attention_eff, memory_eff, overlap;  // fitted
  double step_overhead_us, layer_overhead_us, moe_layer_overhead_us, moe_expert_overhead_us;  // fitted
};

json gpu_row(const gpu_figures& f) {
  return json{{"gpu.name", f.name},
              {"gpu.bf16_tflops", f.bf16},
              {"gpu.fp8_tflops", f.fp8},
              {"gpu.int8_tops", f.int8},
              {"gpu.fp4_tflops", f.fp4},
              {"gpu.hbm_gbps", f.hbm_gbps},
              {"gpu.hbm_gib", f.hbm_gib},
              {"gpu.host_link_gbps", f.host_link},
              {"gpu.nvlink_gbps", f.nvlink},
              {"gpu.rdma_gbps", f.rdma},
              {"gpu.collective_latency_us", f.collective_latency_us},
              {"gpu.collective_mid_gbps", f.collective_mid_gbps},
              {"gpu.collective_gbps", f.collective_gbps},
              {"gpu.compute_efficiency", f.compute_eff},
              {"gpu.attention_efficiency", f.attention_eff},
              {"gpu.memory_efficiency", f.memory_eff},
              {"gpu.overlap", f.overlap},
              {"gpu.step_overhead_us", f.step_overhead_us},
              {"gpu.layer_overhead_us", f.layer_overhead_us},
              {"gpu.moe_layer_overhead_us", f.moe_layer_overhead_us},
              {"gpu.moe_expert_overhead_us", f.moe_expert_overhead_us},
              {"compute.model", "roofline"}};
}

const std::map<std::string, json>& gpus() {
  // Fitted by kvtier model-fit on every point of measurements/step_times.json: A100, H100 and
  // H200 each their compute and memory efficiency; the step, layer and MoE overheads,
  // attention's efficiency and the overlap shared. B200 and MI300X, with no measurement, take
  // H200's.
  static const std::map<std::string, json> table = {
    {"a100", gpu_row({"a100", 312, 0, 624, 0, 2039, 80, 32, 300, 25, 9, 49, 200,
                      0.836, 0.392, 0.926, 0.060, 0, 76.6, 0.3, 5.42})},
    {"h100-sxm", gpu_row({"h100-sxm", 989, 1979, 1979, 0, 3350, 80, 64, 450, 50, 9, 49, 370,
                          0.611, 0.392, 1, 0.060, 0, 76.6, 0.3, 5.42})},
    {"h200", gpu_row({"h200", 989, 1979, 1979, 0, 4800, 141, 64, 450, 50, 9, 49, 370,
                      0.602, 0.392, 0.844, 0.060, 0, 76.6, 0.3, 5.42})},
    {"b200", gpu_row({"b200", 2250, 4500, 4500, 9000, 8000, 180, 64, 900, 50, 9, 49, 370,
                      0.602, 0.392, 0.844, 0.060, 0, 76.6, 0.3, 5.42})},
    {"mi300x", gpu_row({"mi300x", 1307, 2615, 2615, 0, 5300, 192, 64, 448, 50, 9, 49, 370,
                        0.602, 0.392, 0.844, 0.060, 0, 76.6, 0.3, 5.42})},
  };
  return table;
}

std::vector<const char*> names_of(const std::map<std::string, json>& table) {
  std::vector<const char*> out;
  for (const auto& [name, row] : table)
    out.push_back(name.c_str());
  return out;
}

}  // namespace

std::vector<const char*> model_preset_names() {
  return names_of(models());
}

std::vector<const char*> gpu_preset_names() {
  return names_of(gpus());
}

const json& model_preset(const std::string& name) {
  return models().at(name);
}

const json& gpu_preset(const std::string& name) {
  return gpus().at(name);
}

}  // namespace kvtier
