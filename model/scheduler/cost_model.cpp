#include "model/scheduler/cost_model.hpp"

#include <cmath>

#include "core/check.hpp"
#include "core/time_math.hpp"

namespace kvtier {

void batch_shape::add_prefill(uint64_t context, uint64_t tokens) {
  prefill_tokens += tokens;
  prefill_context += context;
  attention_pairs += static_cast<double>(tokens)
                     * (static_cast<double>(context) + static_cast<double>(tokens + 1) / 2.0);
}

void batch_shape::add_decode(uint64_t context) {
  ++decode_seqs;
  decode_context += context;
}

int64_t step_cost::total_ns() const {
  return overhead_ns + total_work_ns;
}

namespace {

double linear_work_ns(const compute_profile& p, const batch_shape& b) {
  return p.prefill_token_ns * static_cast<double>(b.prefill_tokens)
         + p.prefill_attention_ns * b.attention_pairs
         + p.decode_token_ns * b.decode_seqs
         + p.decode_context_ns * static_cast<double>(b.decode_context);
}

}  // namespace

step_cost cost_of(const compute_profile& p, const batch_shape& b) {
  KVTIER_ASSERT(p.layers > 0);
  bool roofline = p.model == compute_model::roofline;
  double work = roofline ? roofline_of(p.roofline, b).work_ns() : linear_work_ns(p, b);
  int64_t total = time_from(work);
  step_cost c;
  c.overhead_ns =
    time_from(roofline ? p.roofline.gpu.step_overhead_us * 1000.0 : p.step_overhead_ns);
  c.total_work_ns = total;
  c.layer_ns = total / p.layers;
  c.last_layer_ns = total - c.layer_ns * (p.layers - 1);
  return c;
}

}  // namespace kvtier
