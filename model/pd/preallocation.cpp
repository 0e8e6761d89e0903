#include "model/pd/preallocation.hpp"

namespace kvtier {

const char* to_string(preallocation_verdict v) {
  switch (v) {
    case preallocation_verdict::granted: return "granted";
    case preallocation_verdict::waiting_queue: return "waiting queue";
    case preallocation_verdict::no_slot: return "no batch slot";
    case preallocation_verdict::no_blocks: return "no blocks";
    case preallocation_verdict::never_fits: return "never fits";
  }
  return "?";
}

preallocation_verdict decide_preallocation(const decode_load& d, uint64_t need_blocks) {
  if (d.waiting > 0)
    return preallocation_verdict::waiting_queue;
  if (d.holding >= d.max_num_seqs)
    return preallocation_verdict::no_slot;
  uint64_t threshold = need_blocks + d.holding * uint64_t{d.reserve_per_running};
  if (threshold > d.available_blocks)
    return preallocation_verdict::no_blocks;
  return preallocation_verdict::granted;
}

}  // namespace kvtier
