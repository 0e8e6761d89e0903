#include "core/model_spec.hpp"

#include <algorithm>
#include <cmath>

namespace kvtier {

uint64_t kv_bytes_per_token(const model_spec& m) {
  if (m.latent_kv())
    return uint64_t{m.layers} * (m.kv_lora_rank + m.rope_head_dim) * m.kv_dtype_bytes;
  return 2ull * m.layers * m.kv_heads * m.head_dim * m.kv_dtype_bytes;
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
  s.kv_dtype = m.kv_dtype;
  s.dtype_bytes = m.kv_dtype_bytes;
  return s;
}

double kv_bytes_per_token_split(const model_spec& m, const parallelism& p) {
  double whole = static_cast<double>(kv_bytes_per_token(m));
  if (m.latent_kv())
    return whole;
  return whole * kv_heads_per_rank(m, p) / m.kv_heads;
}

double dense_flops_per_token(const model_spec& m) {
  return 2.0 * m.active_params;
}

double attention_flops_per_pair(const model_spec& m) {
  double qk = m.head_dim + m.rope_head_dim;
  double v = m.head_dim;
  return 2.0 * m.layers * m.attention_heads * (qk + v);
}

double weight_bytes(const model_spec& m) {
  return m.params * m.weight_dtype_bytes;
}

double weight_bytes_read(const model_spec& m, double tokens) {
  if (m.experts == 0 || m.active_experts >= m.experts || tokens <= 0)
    return weight_bytes(m);
  // params = shared + experts * e, active = shared + active_experts * e.
  double expert = (m.params - m.active_params) / (m.experts - m.active_experts);
  double shared = m.active_params - m.active_experts * expert;
  double untouched = std::pow(1.0 - static_cast<double>(m.active_experts) / m.experts, tokens);
  double experts_read = m.experts * (1.0 - untouched);
  return (shared + experts_read * expert) * m.weight_dtype_bytes;
}

uint32_t dtype_size(const std::string& dtype) {
  if (dtype == "fp8")
    return 1;
  if (dtype == "fp32")
    return 4;
  return 2;
}

}  // namespace kvtier
