#include "runtime/config/model_keys.hpp"

namespace kvtier {

std::vector<option_spec> model_key_specs() {
  return {
    {keys::model::name, 0, 0, {}, false,
     "model name; part of every storage key, so different models never share blocks"},
    {keys::model::layers, 1, 1024, {}, false, "transformer layers"},
    {keys::model::kv_heads, 1, 1024, {}, false, "KV heads (per rank)"},
    {keys::model::head_dim, 1, 4096, {}, false, "head dimension"},
    {keys::model::kv_dtype, 0, 0, {"bf16", "fp16", "fp8", "fp32"}, false,
     "KV cache element type; part of every storage key"},
  };
}

}  // namespace kvtier
