#include "core/model_spec.hpp"

#include <algorithm>
#include <cmath>

namespace kvtier {

namespace {

// KV elements one layer of one token holds on a rank with `heads` KV heads.
uint64_t layer_elements(const model_spec& m, uint32_t heads) {
  if (m.latent_kv())
    return uint64_t{m.kv_lora_rank} + m.rope_head_dim;
  return 2ull * heads * m.head_dim;
}

}  // namespace

uint64_t packed_bytes(uint64_t elements, double bits) {
  // Exact for the dtypes' bits (multiples of 1/4) and any element count below 2^50.
  return static_cast<uint64_t>(std::ceil(static_cast<double>(elements) * bits / 8.0));
}

uint64_t kv_bytes_per_token(const model_spec& m) {
  return uint64_t{m.layers} * packed_bytes(layer_elements(m, m.kv_heads), m.kv_bits);
}

uint32_t kv_heads_per_rank(const model_spec& m, const parallelism& p) {
  if (m.latent_kv())
    return 1;
  return std::max<uint32_t>(1, m.kv_heads / std::max<uint32_t>(p.tp, 1));
}

uint32_t layers_per_rank(const model_spec& m, const parallelism& p) {
  uint32_t stages = std::max<uint32_t>(p.pp, 1);
  return (m.layers + stages - 1) / stages;
}

model_shape shape_per_rank(const model_spec& m, const parallelism& p) {
  model_shape s;
  s.name = m.name;
  s.layers = layers_per_rank(m, p);
  s.kv_heads = kv_heads_per_rank(m, p);
  s.head_dim = m.head_dim;
  s.latent_dim = m.latent_kv() ? m.kv_lora_rank + m.rope_head_dim : 0;
  s.kv_lora_rank = m.latent_kv() ? m.kv_lora_rank : 0;
  s.rope_head_dim = m.latent_kv() ? m.rope_head_dim : 0;
  s.kv_dtype = m.kv_dtype;
  double whole_bytes = m.kv_bits / 8.0;
  if (whole_bytes == std::floor(whole_bytes)) {
    s.dtype_bytes = static_cast<uint32_t>(whole_bytes);
  } else {
    // 4-bit elements pack two to a byte beside their scales: no whole bytes per element.
    s.dtype_bytes = 0;
    s.packed_layer_bytes =
      static_cast<uint32_t>(packed_bytes(layer_elements(m, s.kv_heads), m.kv_bits));
  }
  return s;
}

double kv_bytes_per_token_split(const model_spec& m, const parallelism& p) {
  return static_cast<double>(m.layers) *
         static_cast<double>(packed_bytes(layer_elements(m, kv_heads_per_rank(m, p)), m.kv_bits));
}

double dense_flops_per_token(const model_spec& m) {
  return 2.0 * m.active_params;
}

double attention_flops_per_pair(const model_spec& m, attention_phase phase) {
  double per_head = 0;
  if (m.latent_kv() && phase == attention_phase::decode)
    per_head = (m.kv_lora_rank + m.rope_head_dim) + m.kv_lora_rank;
  else
    per_head = (m.head_dim + m.rope_head_dim) + m.head_dim;
  return 2.0 * m.layers * m.attention_heads * per_head;
}

double weight_bytes(const model_spec& m) {
  return m.params * m.weight_bits / 8.0;
}

double weight_bytes_read(const model_spec& m, double tokens) {
  if (m.experts == 0 || m.active_experts >= m.experts || tokens <= 0)
    return weight_bytes(m);
  // params = shared + experts * e, active = shared + active_experts * e.
  double expert = (m.params - m.active_params) / (m.experts - m.active_experts);
  double shared = m.active_params - m.active_experts * expert;
  return (shared + experts_touched(m, tokens) * expert) * m.weight_bits / 8.0;
}

double experts_touched(const model_spec& m, double tokens) {
  if (m.experts == 0 || tokens <= 0)
    return 0;
  if (m.active_experts >= m.experts)
    return m.experts;
  double untouched = std::pow(1.0 - static_cast<double>(m.active_experts) / m.experts, tokens);
  return m.experts * (1.0 - untouched);
}

double dtype_bits(const std::string& dtype) {
  if (dtype == "bf16" || dtype == "fp16")
    return 16;
  if (dtype == "fp32")
    return 32;
  if (dtype == "fp8" || dtype == "int8")
    return 8;
  // A group of 128 values with one 16-bit scale and one 16-bit zero point (AWQ/GPTQ weights,
  // LMDeploy's int4 KV per head and token): 4 + 32/128 bits.
  if (dtype == "int4")
    return 4.25;
  // NVFP4: E2M1 values, one FP8 (E4M3) scale per 16: 4 + 8/16 bits.
  if (dtype == "fp4")
    return 4.5;
  return 0;
}

}  // namespace kvtier
