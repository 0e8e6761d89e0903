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
    {"llama3-8b", model_row("llama3-8b", 8.03, nullptr, 32, 4096, 32, 8, 128, 0, 0, 0, 0, "bf16")},
    {"llama3-70b",
     model_row("llama3-70b", 70.6, nullptr, 80, 8192, 64, 8, 128, 0, 0, 0, 0, "bf16")},
    {"qwen2.5-7b",
     model_row("qwen2.5-7b", 7.61, nullptr, 28, 3584, 28, 4, 128, 0, 0, 0, 0, "bf16")},
    {"mixtral-8x7b",
     model_row("mixtral-8x7b", 46.7, 12.9, 32, 4096, 32, 8, 128, 0, 0, 8, 2, "bf16")},
    // MLA: head_dim is qk_nope_head_dim (= v_head_dim); weights ship in FP8.
    {"deepseek-v3",
     model_row("deepseek-v3", 671, 37, 61, 7168, 128, 128, 128, 512, 64, 256, 8, "fp8")},
  };
  return table;
}

// One row per GPU: data-sheet figures (dense, no sparsity; bandwidths per direction) and the
// efficiency factors fitted in docs/models.md.
json gpu_row(const char* name, double bf16, double fp8, double hbm_gbps, double hbm_gib,
             double host_link, double nvlink, double rdma, double compute_eff, double memory_eff,
             double overhead_us) {
  return json{{"gpu.name", name},
              {"gpu.bf16_tflops", bf16},
              {"gpu.fp8_tflops", fp8},
              {"gpu.hbm_gbps", hbm_gbps},
              {"gpu.hbm_gib", hbm_gib},
              {"gpu.host_link_gbps", host_link},
              {"gpu.nvlink_gbps", nvlink},
              {"gpu.rdma_gbps", rdma},
              {"gpu.compute_efficiency", compute_eff},
              {"gpu.memory_efficiency", memory_eff},
              {"gpu.step_overhead_us", overhead_us},
              {"compute.model", "roofline"}};
}

const std::map<std::string, json>& gpus() {
  static const std::map<std::string, json> table = {
    // Fitted: H100 and H200 (docs/models.md). The others, with no measurement found, take the
    // factors the two share and H100's overhead.
    {"a100", gpu_row("a100", 312, 0, 2039, 80, 32, 300, 25, 0.47, 0.67, 1500)},
    {"h100-sxm", gpu_row("h100-sxm", 989, 1979, 3350, 80, 64, 450, 50, 0.47, 0.67, 1500)},
    {"h200", gpu_row("h200", 989, 1979, 4800, 141, 64, 450, 50, 0.47, 0.67, 1750)},
    {"b200", gpu_row("b200", 2250, 4500, 8000, 180, 64, 900, 50, 0.47, 0.67, 1500)},
    {"mi300x", gpu_row("mi300x", 1307, 2615, 5300, 192, 64, 448, 50, 0.47, 0.67, 1500)},
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
