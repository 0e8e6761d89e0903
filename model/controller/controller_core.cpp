// The controller core's construction, routing lookup and report; each other job lives in a
// file of its own (controller_*.cpp).

#include "model/controller/controller_core.hpp"

namespace kvtier {

controller_core::controller_core(const cache_options& cache, const controller_options& options)
  : model_(cache), options_(options), tracker_(options.storage_namespace) {
  model_.set_event_sink(options.events);
  // The tiers' capacity bounds the tree: sized now, its index never rehashes under a step (a
  // pause of milliseconds once the tree holds tens of thousands of blocks). Unbounded tiers
  // grow as they fill.
  constexpr uint64_t reserve_limit = uint64_t{1} << 21;
  uint64_t nodes = uint64_t{cache.device_blocks} + cache.host_blocks;
  if (nodes <= reserve_limit) {
    model_.reserve_nodes(static_cast<uint32_t>(nodes));
    tracker_.reserve(cache.device_blocks, cache.host_blocks);
  }
}

prefix_hit controller_core::lookup(const std::vector<cache_block>& blocks) {
  model_.match(blocks.data(), blocks.size(), match_);
  return {match_.device, match_.host, match_.device_tokens, match_.host_tokens};
}

controller_report controller_core::report() const {
  controller_report r;
  const cache_counters& c = model_.counters();
  r.device_evictions = c.device_evictions;
  r.host_evictions = c.host_evictions;
  r.dropped = c.dropped;
  r.backups = c.backups;
  r.backups_skipped = c.backups_skipped;
  r.write_backs = c.write_backs;
  r.swap_ins = c.swap_ins;
  r.loads = c.loads;
  r.stores = c.stores;
  r.storage_probes = storage_probes_;
  r.failed_loads = failed_loads_;
  r.transfers = tracker_.issued();
  r.copies_in_flight = tracker_.outstanding_count();
  r.invariant_checked = invariants_.checked;
  r.invariant_violations = invariants_.violations;
  r.invariant_messages = invariants_.messages;
  r.tree_nodes = model_.tree().size();
  r.device_used = model_.pool(tier::device).used_count();
  r.host_used = model_.pool(tier::host).used_count();
  r.swap_ins_by_request = swap_in_log_;
  r.preemption = preemption_;
  r.preemption.d2h_blocks = c.preemption_backups;
  r.preemption.stored_blocks = c.preemption_stores;
  r.prefetch = prefetch_;
  return r;
}

}  // namespace kvtier
