#include "model/scheduler/roofline.hpp"

#include <algorithm>

#include "model/scheduler/cost_model.hpp"

namespace kvtier {

namespace {

// Activations between layers and ranks are bf16 whatever the weights' dtype.
constexpr double activation_bytes = 2;

// KV reads of a decode step per cached KV element: a kernel that reads each KV head once per
// query head of its group reads it heads / kv_heads times (per rank: TP splits both).
double decode_kv_read_factor(const roofline_profile& r) {
  const model_spec& m = r.model;
  if (r.kv_reads != decode_kv_reads::per_query_head || m.latent_kv() || m.kv_heads == 0)
    return 1;
  double tp = std::max<uint32_t>(r.parallel.tp, 1);
  double q_heads = m.attention_heads / tp;
  double kv_heads = kv_heads_per_rank(m, r.parallel);
  return std::max(1.0, q_heads / kv_heads);
}

// Messages up to this size move at the measured mid-size rate, the rest at the bus bandwidth
// (docs/models.md, "Communication").
constexpr double mid_message_bytes = 1024.0 * 1024.0;

// Latency plus `wire` bytes (ring bytes of a `bytes` message, `share` of it per byte).
double collective_ns(const gpu_spec& g, double bytes, double share) {
  double mid = std::max(g.collective_mid_gbps, 1e-9), peak = std::max(g.collective_gbps, 1e-9);
  double wire = share * bytes, knee = share * mid_message_bytes;  // GB/s = bytes per ns
  return g.collective_latency_us * 1000.0 + std::min(wire, knee) / mid +
         std::max(0.0, wire - knee) / peak;
}

}  // namespace

double allreduce_ns(const gpu_spec& g, uint32_t tp, double bytes) {
  if (tp <= 1)
    return 0;
  return collective_ns(g, bytes, 2.0 * (tp - 1) / tp);
}

double handoff_ns(const gpu_spec& g, double bytes) {
  return collective_ns(g, bytes, 1.0);
}

double roofline_parts::serial_ns() const {
  double hi = std::max(compute_ns, memory_ns), lo = std::min(compute_ns, memory_ns);
  return hi + (1.0 - overlap) * lo + layer_ns + collective_ns;
}

double roofline_parts::work_ns() const {
  double slots = static_cast<double>(microbatches + stages - 1) / stages;
  return slots * serial_ns() + (stages - 1) * handoff_ns;
}

roofline_parts roofline_of(const roofline_profile& r, const batch_shape& b) {
  const model_spec& m = r.model;
  const gpu_spec& g = r.gpu;
  double tp = std::max<uint32_t>(r.parallel.tp, 1);
  roofline_parts out;
  out.overlap = std::clamp(g.overlap, 0.0, 1.0);
  out.stages = std::max<uint32_t>(r.parallel.pp, 1);
  double whole_tokens = static_cast<double>(b.prefill_tokens) + b.decode_seqs;
  if (whole_tokens == 0)
    return out;
  // Micro-batches beyond one per token would be empty.
  out.microbatches = out.stages > 1
                       ? std::max<uint32_t>(1, std::min<double>(r.parallel.pp_microbatches,
                                                                whole_tokens))
                       : 1;
  double share = 1.0 / out.microbatches;
  double tokens = whole_tokens * share;
  double prefill_pairs = b.attention_pairs * share;
  double decode_pairs = static_cast<double>(b.decode_context) * share;

  double dense = dense_flops_per_token(m) * tokens;
  double attention = attention_flops_per_pair(m, attention_phase::prefill) * prefill_pairs +
                     attention_flops_per_pair(m, attention_phase::decode) * decode_pairs;
  double gemm_rate = g.flops_per_ns(m.weight_dtype) * g.compute_efficiency;
  double attention_rate = g.flops_per_ns("bf16") * g.compute_efficiency * g.attention_efficiency;
  out.attention_ns = attention / tp / attention_rate;
  out.compute_ns = dense / tp / gemm_rate + out.attention_ns;

  double decode_reads = static_cast<double>(b.decode_context) * decode_kv_read_factor(r);
  double kv_tokens = (static_cast<double>(b.prefill_context) + static_cast<double>(b.prefill_tokens) +
                      b.decode_seqs + decode_reads) * share;
  double bytes =
    weight_bytes_read(m, tokens) / tp + kv_bytes_per_token_split(m, r.parallel) * kv_tokens;
  out.memory_ns = bytes / (g.hbm_gbps * g.memory_efficiency);

  // An MoE layer runs each expert its tokens go to as a GEMM of its own: a cost per expert
  // beyond the bytes of its weights (docs/models.md, "The step model").
  double per_layer = g.layer_overhead_us;
  if (m.experts > 0)
    per_layer += g.moe_layer_overhead_us + experts_touched(m, tokens) * g.moe_expert_overhead_us;
  out.layer_ns = m.layers * per_layer * 1000.0;

  double activations = tokens * m.hidden_size * activation_bytes;
  // Megatron-style TP: one all-reduce after attention, one after the MLP, per layer.
  out.collective_ns = 2.0 * m.layers * allreduce_ns(g, r.parallel.tp, activations);
  if (out.stages > 1)
    out.handoff_ns = handoff_ns(g, activations);
  return out;
}

}  // namespace kvtier
