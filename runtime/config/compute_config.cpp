#include "runtime/config/compute_config.hpp"

#include <cmath>
#include <cstdio>
#include <string>

#include "runtime/config/cache_keys.hpp"
#include "runtime/config/scheduler_keys.hpp"

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

constexpr double gib = 1024.0 * 1024.0 * 1024.0;

// vLLM's memory profile of Meta-Llama-3-8B (hidden 4096) at 8192 tokens: "PyTorch activation
// peak memory 1.26GiB", "non_torch_memory 1.79GiB" at TP 1 and 3.58GiB at TP 2 (vLLM PR
// #10511, docs/models.md): 1.26 GiB / (8192 x 4096) = 40 bytes per token per hidden unit.
constexpr double activation_bytes_per_token_hidden = 40;
constexpr double reserve_gib_tp1 = 1.79;
constexpr double reserve_gib_tp_many = 3.58;

std::string gib_text(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f GiB", bytes / gib);
  return buf;
}

std::string deployment_text(const config& c, const model_spec& m, const parallelism& p) {
  return "model " + m.name + " (" + c.text(keys::model::weight_dtype) + " weights) on gpu " +
         c.text(keys::gpu::name) + " with parallel.tp " + std::to_string(p.tp) +
         " x parallel.pp " + std::to_string(p.pp);
}

std::string holdings_text(const rank_memory& r) {
  return gib_text(r.weights) + " of weights, " + gib_text(r.activations) +
         " of activations (scheduler.token_budget) and a " + gib_text(r.reserve) +
         " runtime reserve (compute.runtime_reserve_gib) per rank, of " + gib_text(r.usable) +
         " usable (gpu.hbm_gib x compute.hbm_utilization)";
}

}  // namespace

rank_memory rank_memory_of(const config& c, const model_spec& m, const parallelism& p,
                           const model_shape& per_rank) {
  rank_memory r;
  r.usable = c.number(keys::gpu::hbm_gib) * gib * c.number(keys::compute::hbm_utilization);
  r.weights = weight_bytes(m) / (std::max<uint32_t>(p.tp, 1) * std::max<uint32_t>(p.pp, 1));
  r.activations = static_cast<double>(c.integer(keys::scheduler::token_budget)) *
                  m.hidden_size * activation_bytes_per_token_hidden;
  double reserve_gib = c.is_set(keys::compute::runtime_reserve_gib)
                         ? c.number(keys::compute::runtime_reserve_gib)
                         : (p.tp > 1 ? reserve_gib_tp_many : reserve_gib_tp1);
  r.reserve = reserve_gib * gib;
  r.kv_per_token = static_cast<double>(per_rank.bytes_per_token());
  return r;
}

void fit_device_tier(const config& c, replay_config& rc) {
  if (c.text(keys::compute::model) != "roofline")
    return;
  rank_memory r = rank_memory_of(c, rc.spec, rc.parallel, rc.model);
  double free = r.free_for_kv();
  double block_bytes = r.kv_per_token * rc.block_size;
  if (free < block_bytes)
    throw config_error(deployment_text(c, rc.spec, rc.parallel) + " does not fit: " +
                       holdings_text(r) + ", leaving no room for one KV block; raise "
                       "parallel.tp or parallel.pp, or choose a GPU with more HBM");
  double fits = std::floor(free / block_bytes);
  bool unsized = c.is_default(keys::cache::device_tokens) &&
                 c.is_default(keys::cache::device_blocks);
  if (unsized) {
    rc.cache.device_blocks = static_cast<uint32_t>(std::min(fits, 4294967295.0));
    return;
  }
  if (static_cast<double>(rc.cache.device_blocks) > fits)
    throw config_error("cache.device_tokens / cache.device_blocks: " +
                       std::to_string(rc.cache.device_blocks) + " blocks of " +
                       gib_text(block_bytes) + " (" + gib_text(rc.cache.device_blocks *
                       block_bytes) + ") do not fit beside " + holdings_text(r) + " of " +
                       deployment_text(c, rc.spec, rc.parallel) + "; at most " +
                       std::to_string(static_cast<uint64_t>(fits)) + " blocks fit (unset "
                       "both keys to size the device tier from the HBM)");
}

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
  m.kv_bits = dtype_bits(m.kv_dtype);
  m.weight_dtype = c.text(keys::model::weight_dtype);
  m.weight_bits = dtype_bits(m.weight_dtype);
  check_experts(m);
  return m;
}

parallelism resolve_parallelism(const config& c, const model_spec& m) {
  parallelism p;
  p.tp = u32(c, keys::parallel::tp);
  p.pp = u32(c, keys::parallel::pp);
  p.pp_microbatches = u32(c, keys::parallel::pp_microbatches);
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
  g.int8_tops = c.number(keys::gpu::int8_tops);
  g.fp4_tflops = c.number(keys::gpu::fp4_tflops);
  g.hbm_gbps = c.number(keys::gpu::hbm_gbps);
  g.hbm_gib = c.number(keys::gpu::hbm_gib);
  g.host_link_gbps = c.number(keys::gpu::host_link_gbps);
  g.nvlink_gbps = c.number(keys::gpu::nvlink_gbps);
  g.rdma_gbps = c.number(keys::gpu::rdma_gbps);
  g.collective_latency_us = c.number(keys::gpu::collective_latency_us);
  g.collective_mid_gbps = c.number(keys::gpu::collective_mid_gbps);
  g.collective_gbps = c.number(keys::gpu::collective_gbps);
  g.compute_efficiency = c.number(keys::gpu::compute_efficiency);
  g.attention_efficiency = c.number(keys::gpu::attention_efficiency);
  g.memory_efficiency = c.number(keys::gpu::memory_efficiency);
  g.overlap = c.number(keys::gpu::overlap);
  g.step_overhead_us = c.number(keys::gpu::step_overhead_us);
  g.layer_overhead_us = c.number(keys::gpu::layer_overhead_us);
  g.moe_layer_overhead_us = c.number(keys::gpu::moe_layer_overhead_us);
  g.moe_expert_overhead_us = c.number(keys::gpu::moe_expert_overhead_us);
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
  cp.roofline.kv_reads = c.text(keys::compute::decode_kv_reads) == "per_query_head"
                           ? decode_kv_reads::per_query_head
                           : decode_kv_reads::grouped;
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
    {"attention_flops_per_context_token", attention_flops_per_pair(m, attention_phase::prefill)},
    {"decode_attention_flops_per_context_token",
     attention_flops_per_pair(m, attention_phase::decode)},
    {"weight_dtype", m.weight_dtype},
    {"weight_bytes", weight_bytes(m)},
    {"compute_model", c.text(keys::compute::model)},
  };
}

}  // namespace kvtier
