#include "runtime/config/compute_keys.hpp"

namespace kvtier {

std::vector<option_spec> compute_key_specs() {
  return {
    {keys::compute::step_overhead_us, 0, 1e9, {}, false,
     "fixed time of every step: weights streamed, kernels launched, tokens sampled"},
    {keys::compute::prefill_token_us, 0, 1e9, {}, false,
     "dense compute per prefill token, microseconds"},
    {keys::compute::prefill_attention_ns, 0, 1e9, {}, false,
     "attention per prefill token per context token, nanoseconds"},
    {keys::compute::decode_token_us, 0, 1e9, {}, false,
     "dense compute per decode sequence, microseconds"},
    {keys::compute::decode_context_ns, 0, 1e9, {}, false,
     "KV reading per decode sequence per context token, nanoseconds"},
    {keys::compute::model, 0, 0, {"linear", "roofline"}, false,
     "step cost: linear (the compute.* coefficients) or roofline (model.*, gpu.*, parallel.*)"},
    {keys::compute::decode_kv_reads, 0, 0, {"grouped", "per_query_head"}, false,
     "how a decode step's attention reads a grouped-query model's KV under compute.model="
     "roofline: grouped (each KV head once, FlashAttention, XQA) or per_query_head (once per "
     "query head, TensorRT-LLM before v0.8)"},
    {keys::compute::hbm_utilization, 0.01, 1, {}, false,
     "share of each GPU's HBM the engine may use for weights, activations and KV under "
     "compute.model=roofline (vLLM's gpu_memory_utilization)"},
    {keys::compute::runtime_reserve_gib, 0, 1e6, {}, true,
     "HBM per rank outside weights, activations and KV (CUDA context, NCCL buffers), GiB; "
     "null: 1.79 at parallel.tp 1, 3.58 above (docs/models.md, \"Memory must fit\")"},
  };
}

}  // namespace kvtier
