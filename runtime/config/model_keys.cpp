#include "runtime/config/model_keys.hpp"

namespace kvtier {

std::vector<option_spec> model_key_specs() {
  return {
    {keys::model::name, 0, 0, {}, false,
     "model name; part of every storage key, so different models never share blocks"},
    {keys::model::layers, 1, 1024, {}, false, "transformer layers"},
    {keys::model::kv_heads, 1, 1024, {}, false, "KV heads (split over parallel.tp)"},
    {keys::model::head_dim, 1, 4096, {}, false,
     "head dimension (MLA: the no-rope part of a query/key head, = V's head)"},
    {keys::model::kv_dtype, 0, 0, {"bf16", "fp16", "fp8", "int8", "int4", "fp4", "fp32"}, false,
     "KV cache element type (4-bit ones with their scales, docs/models.md); part of every "
     "storage key"},
    {keys::model::params_b, 1e-3, 1e5, {}, false, "parameters, billions"},
    {keys::model::active_params_b, 1e-3, 1e5, {}, true,
     "parameters one token passes through, billions (MoE); null: model.params_b"},
    {keys::model::hidden_size, 1, 1048576, {}, false, "hidden size"},
    {keys::model::attention_heads, 1, 4096, {}, false, "query heads"},
    {keys::model::kv_lora_rank, 0, 65536, {}, false,
     "MLA latent rank (DeepSeek-V2/V3: one latent per token per layer, no separate V); 0: none"},
    {keys::model::rope_head_dim, 0, 4096, {}, false,
     "MLA rope dimensions cached beside the latent (qk_rope_head_dim); 0 without MLA"},
    {keys::model::experts, 0, 65536, {}, false, "routed experts of an MoE; 0: dense"},
    {keys::model::active_experts, 0, 65536, {}, false, "routed experts per token"},
    {keys::model::weight_dtype, 0, 0, {"bf16", "fp16", "fp8", "int8", "int4", "fp4", "fp32"},
     false, "weight element type: bytes read per step and which peak FLOPs apply (int4: "
     "weight-only, 16-bit multiplies; docs/models.md)"},
  };
}

}  // namespace kvtier
