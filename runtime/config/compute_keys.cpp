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
    {keys::compute::allreduce_latency_us, 0, 1e6, {}, false,
     "fixed time of one all-reduce or stage hand-off under compute.model=roofline"},
  };
}

}  // namespace kvtier
