#include "runtime/config/compute_config.hpp"

#include <string>

namespace kvtier {

namespace {

uint32_t u32(const config& c, integer_key k) {
  return static_cast<uint32_t>(c.integer(k));
}

void check_experts(const model_spec& m) {
  if (m.active_experts > m.experts)
    throw config_error("model.active_experts: " + std::to_string(m.active_experts) +
                       " is more than model.experts (" + std::to_string(m.experts) + ")");
  if (m.active_params > m.params)
    throw config_error("model.active_params_b: more than model.params_b");
  if ((m.kv_lora_rank == 0) != (m.rope_head_dim == 0))
    throw config_error("model.kv_lora_rank and model.rope_head_dim: MLA needs both above 0; a "
                       "model without MLA sets both to 0");
}

}  // namespace

model_spec resolve_model_spec(const config& c) {
  model_spec m;
  m.name = c.text(keys::model::name);
  m.params = c.number(keys::model::params_b) * 1e9;
  m.active_params = c.is_set(keys::model::active_params_b)
                      ? c.number(keys::model::active_params_b) * 1e9
                      : m.params;
  m.layers = u32(c, keys::model::layers);
  m.hidden_size = u32(c, keys::model::hidden_size);
  m.attention_heads = u32(c, keys::model::attention_heads);
  m.kv_heads = u32(c, keys::model::kv_heads);
  m.head_dim = u32(c, keys::model::head_dim);
  m.kv_lora_rank = u32(c, keys::model::kv_lora_rank);
  m.rope_head_dim = u32(c, keys::model::rope_head_dim);
  m.experts = u32(c, keys::model::experts);
  m.active_experts = u32(c, keys::model::active_experts);
  m.kv_dtype = c.text(keys::model::kv_dtype);
  m.kv_dtype_bytes = dtype_size(m.kv_dtype);
  m.weight_dtype_bytes = dtype_size(c.text(keys::model::weight_dtype));
  check_experts(m);
  return m;
}

parallelism resolve_parallelism(const config& c, const model_spec& m) {
  parallelism p;
  p.tp = u32(c, keys::parallel::tp);
  p.pp = u32(c, keys::parallel::pp);
  if (m.attention_heads % p.tp != 0)
    throw config_error("parallel.tp: " + std::to_string(p.tp) + " ranks do not divide the " +
                       std::to_string(m.attention_heads) + " heads of model.attention_heads");
  if (!m.latent_kv() && m.kv_heads % p.tp != 0 && p.tp % m.kv_heads != 0)
    throw config_error("parallel.tp: " + std::to_string(p.tp) + " ranks neither divide nor are "
                       "a multiple of the " + std::to_string(m.kv_heads) +
                       " heads of model.kv_heads");
  if (p.pp > m.layers)
    throw config_error("parallel.pp: " + std::to_string(p.pp) + " stages for " +
                       std::to_string(m.layers) + " layers of model.layers");
  return p;
}

gpu_spec resolve_gpu_spec(const config& c) {
  gpu_spec g;
  g.name = c.text(keys::gpu::name);
  g.bf16_tflops = c.number(keys::gpu::bf16_tflops);
  g.fp8_tflops = c.number(keys::gpu::fp8_tflops);
  g.hbm_gbps = c.number(keys::gpu::hbm_gbps);
  g.hbm_gib = c.number(keys::gpu::hbm_gib);
  g.host_link_gbps = c.number(keys::gpu::host_link_gbps);
  g.nvlink_gbps = c.number(keys::gpu::nvlink_gbps);
  g.rdma_gbps = c.number(keys::gpu::rdma_gbps);
  g.compute_efficiency = c.number(keys::gpu::compute_efficiency);
  g.memory_efficiency = c.number(keys::gpu::memory_efficiency);
  g.step_overhead_us = c.number(keys::gpu::step_overhead_us);
  return g;
}

compute_profile resolve_compute(const config& c, const model_spec& m, const parallelism& p) {
  compute_profile cp;
  cp.model = c.text(keys::compute::model) == "roofline" ? compute_model::roofline
                                                         : compute_model::linear;
  cp.step_overhead_ns = c.number(keys::compute::step_overhead_us) * 1000.0;
  cp.prefill_token_ns = c.number(keys::compute::prefill_token_us) * 1000.0;
  cp.prefill_attention_ns = c.number(keys::compute::prefill_attention_ns);
  cp.decode_token_ns = c.number(keys::compute::decode_token_us) * 1000.0;
  cp.decode_context_ns = c.number(keys::compute::decode_context_ns);
  cp.roofline.model = m;
  cp.roofline.gpu = resolve_gpu_spec(c);
  cp.roofline.parallel = p;
  cp.roofline.allreduce_latency_ns = c.number(keys::compute::allreduce_latency_us) * 1000.0;
  cp.layers = layers_per_rank(m, p);
  return cp;
}

nlohmann::json model_summary(const config& c, const replay_config& rc) {
  const model_spec& m = rc.spec;
  return {
    {"name", m.name},
    {"kv_bytes_per_token", kv_bytes_per_token(m)},
    {"kv_bytes_per_token_per_rank", rc.model.bytes_per_token()},
    {"kv_layout", m.latent_kv() ? "latent" : "separate_kv"},
    {"tp", rc.parallel.tp},
    {"pp", rc.parallel.pp},
    {"dense_flops_per_token", dense_flops_per_token(m)},
    {"attention_flops_per_context_token", attention_flops_per_pair(m)},
    {"weight_bytes", weight_bytes(m)},
    {"compute_model", c.text(keys::compute::model)},
  };
}

}  // namespace kvtier
