#include "model/scheduler/roofline.hpp"

#include <algorithm>

#include "model/scheduler/cost_model.hpp"

namespace kvtier {

namespace {

// Activations between layers and ranks are bf16 whatever the weights' dtype.
constexpr double activation_bytes = 2;

double collectives_ns(const roofline_profile& r, double tokens) {
  const parallelism& p = r.parallel;
  double link = std::max(r.gpu.nvlink_gbps, 1e-9);  // GB/s = bytes per ns
  double activations = tokens * r.model.hidden_size * activation_bytes;
  double ns = 0;
  if (p.tp > 1) {
    // Megatron-style TP: one all-reduce after attention, one after the MLP, per layer.
    double ring_bytes = 2.0 * (p.tp - 1) / p.tp * activations;
    ns += 2.0 * r.model.layers * (ring_bytes / link + r.allreduce_latency_ns);
  }
  if (p.pp > 1)
    ns += (p.pp - 1) * (activations / link + r.allreduce_latency_ns);
  return ns;
}

}  // namespace

double roofline_parts::work_ns() const {
  return std::max(compute_ns, memory_ns) + collective_ns;
}

roofline_parts roofline_of(const roofline_profile& r, const batch_shape& b) {
  const model_spec& m = r.model;
  double tp = std::max<uint32_t>(r.parallel.tp, 1);
  double tokens = static_cast<double>(b.prefill_tokens) + b.decode_seqs;
  double pairs = b.attention_pairs + static_cast<double>(b.decode_context);
  roofline_parts out;
  if (tokens == 0)
    return out;
  double flops = dense_flops_per_token(m) * tokens + attention_flops_per_pair(m) * pairs;
  out.compute_ns =
    flops / tp / (r.gpu.flops_per_ns(m.weight_dtype_bytes) * r.gpu.compute_efficiency);
  double kv_tokens =
    static_cast<double>(b.prefill_context) + static_cast<double>(b.decode_context) + tokens;
  double bytes =
    weight_bytes_read(m, tokens) / tp + kv_bytes_per_token_split(m, r.parallel) * kv_tokens;
  out.memory_ns = bytes / (r.gpu.hbm_gbps * r.gpu.memory_efficiency);
  out.collective_ns = collectives_ns(r, tokens);
  return out;
}

}  // namespace kvtier
