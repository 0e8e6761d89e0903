// The controller's invariant checks (listed in controller_core.hpp), over the model's own.

#include "model/controller/controller_core.hpp"

#include <string>

namespace kvtier {

void controller_core::check_step_start(const step_inputs& inputs) {
  for (block_id b : inputs.written) {
    invariants_.expect(model_.pool(tier::device).pins(b) == 0, [&] {
      return "device block " + std::to_string(b) + " is computed into while a transfer touches it";
    });
    auto read = preemption_reads_.find(b);
    invariants_.expect(read == preemption_reads_.end(), [&] {
      return "reuse barrier: device block " + std::to_string(b) +
             " is computed into while the preemption save reading it (order " +
             std::to_string(read->second) + ") is in flight";
    });
  }
}

void controller_core::check(bool quiescent) {
  check_invariants(model_, quiescent, invariants_);
  absl::flat_hash_map<node_id, uint32_t> holds;
  uint64_t owned = 0;
  for (const auto& [id, r] : requests_) {
    for (node_id n : r.path)
      ++holds[n];
    for (node_id n : r.prefetch_path)
      ++holds[n];
    for (uint8_t o : r.owned)
      owned += o;
  }
  for (node_id n : model_.tree().live_nodes()) {
    uint32_t expected = holds.contains(n) ? holds[n] : 0;
    invariants_.expect(model_.tree().node(n).ref_count == expected, [&] {
      return "node " + std::to_string(n) + ": ref count " +
             std::to_string(model_.tree().node(n).ref_count) + " but " +
             std::to_string(expected) + " request holds";
    });
  }
  invariants_.expect(owned == model_.private_device_blocks(),
                     [] { return std::string{"private device blocks equal what requests own"}; });
  // A lookup made at the queue's head is held past the capacity (controller_core.hpp).
  uint64_t protected_held = 0, capacity_held = 0;
  for (const auto& [id, r] : requests_) {
    protected_held += r.protected_hold ? r.prefetch_path.size() : 0;
    capacity_held +=
      r.protected_hold && !r.lookup_before_admission ? r.prefetch_path.size() : 0;
  }
  invariants_.expect(protected_held == protected_blocks_ &&
                       capacity_held <= options_.prefetch_capacity_blocks,
                     [&] {
                       return "protected prefetches hold " + std::to_string(protected_held) +
                              " blocks, counted " + std::to_string(protected_blocks_) +
                              ", capacity " + std::to_string(options_.prefetch_capacity_blocks);
                     });
  // The reuse barrier's ledger: each block a preemption save reads is pinned by that order.
  for (const auto& [block, order] : preemption_reads_)
    invariants_.expect(model_.pool(tier::device).pins(block) > 0, [&, b = block, o = order] {
      return "reuse barrier: device block " + std::to_string(b) +
             " is not pinned, yet preemption save " + std::to_string(o) + " is reading it";
    });
  if (quiescent) {
    invariants_.expect(requests_.empty(), [&] {
      return std::to_string(requests_.size()) + " requests still hold blocks at the end";
    });
    invariants_.expect(tracker_.outstanding_count() == 0,
                       [] { return std::string{"no transfer outstanding at the end"}; });
    invariants_.expect(preemption_reads_.empty(),
                       [] { return std::string{"no preemption save reading at the end"}; });
  }
}

}  // namespace kvtier
