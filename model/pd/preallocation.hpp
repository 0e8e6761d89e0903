#pragma once

// FastDeploy's preallocate_resource_in_d (docs/fastdeploy.md §5): a decode instance takes a
// request prefilled elsewhere only if nothing waits before it, a batch slot is free, and its
// blocks fit with the scheduler's output reserve kept for every running request
// (_get_can_schedule_prefill_threshold_block). Pure, so the rules are tested on their own.

#include <cstdint>

namespace kvtier {

enum class preallocation_verdict : uint8_t {
  granted = 0,
  waiting_queue = 1,  ///< requests wait on D: they go first
  no_slot = 2,        ///< max_num_seqs requests hold a slot
  no_blocks = 3,      ///< the blocks plus the reserve do not fit
  never_fits = 4,     ///< the request could never be held on D's device whole: rejected
};

const char* to_string(preallocation_verdict v);

struct decode_load {
  uint64_t waiting = 0;      ///< requests waiting on D
  uint64_t holding = 0;      ///< requests holding a slot: running, or preallocated and waiting for KV
  uint32_t max_num_seqs = 0;
  uint64_t available_blocks = 0;
  uint32_t reserve_per_running = 0;  ///< the scheduler's current output reserve
};

/// Whether D can preallocate `need_blocks` fresh blocks now.
preallocation_verdict decide_preallocation(const decode_load& d, uint64_t need_blocks);

}  // namespace kvtier
