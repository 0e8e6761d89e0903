#include "model/scheduler/layer_pipeline.hpp"

#include <algorithm>

#include "core/check.hpp"
#include "core/time_math.hpp"

namespace kvtier {

pipeline_result run_pipeline(int64_t start_ns, const step_cost& cost, uint32_t layers,
                             const std::vector<int64_t>& ready_ns,
                             std::vector<int64_t>* layer_end_ns, int64_t layer_wait_ns,
                             int64_t reused_ready_ns) {
  KVTIER_ASSERT(layers > 0);
  KVTIER_ASSERT(ready_ns.empty() || ready_ns.size() == layers);
  pipeline_result r;
  int64_t t = time_add(start_ns, cost.overhead_ns);
  if (reused_ready_ns > t) {
    r.reuse_wait_ns = reused_ready_ns - t;
    t = reused_ready_ns;
  }
  if (ready_ns.empty() && !layer_end_ns && layer_wait_ns >= 0 && cost.layer_ns >= 0
      && cost.last_layer_ns >= 0) {
    // No layer waits on a copy: the loop below adds the same non-negative times in turn, so
    // its end is their sum, capped as time_add caps. A decode instance steps every few
    // milliseconds of virtual time over 80 layers, where the loop was 2% of a 1P+1D replay.
    __int128 sum = static_cast<__int128>(layers) * layer_wait_ns
                 + static_cast<__int128>(layers - 1) * cost.layer_ns + cost.last_layer_ns;
    r.stall_ns = static_cast<int64_t>(layers) * layer_wait_ns;
    __int128 end = t + sum;
    r.end_ns = end > time_limit_ns ? time_limit_ns : static_cast<int64_t>(end);
    return r;
  }
  for (uint32_t i = 0; i < layers; ++i) {
    if (!ready_ns.empty() && ready_ns[i] > t) {
      r.stall_ns += ready_ns[i] - t;
      t = ready_ns[i];
    }
    t = time_add(t, layer_wait_ns);
    r.stall_ns += layer_wait_ns;
    t = time_add(t, i + 1 == layers ? cost.last_layer_ns : cost.layer_ns);
    if (layer_end_ns)
      layer_end_ns->push_back(t);
  }
  r.end_ns = t;
  return r;
}

}  // namespace kvtier
