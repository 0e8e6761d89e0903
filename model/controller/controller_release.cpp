// Preemption and release: what a request's blocks become when it finishes, is preempted or
// stops holding its prefetch.

#include "model/controller/controller_core.hpp"

#include <algorithm>

#include "core/check.hpp"

namespace kvtier {

void controller_core::drop_prefetch_hold(request_state& r) {
  model_.release_from_tail(r.prefetch_path);
  if (r.protected_hold) {
    KVTIER_ASSERT(protected_blocks_ >= r.prefetch_path.size());
    protected_blocks_ -= static_cast<uint32_t>(r.prefetch_path.size());
    r.protected_hold = false;
  }
  r.prefetch_path.clear();
}

void controller_core::release(request_state& r) {
  model_.release_from_tail(r.path);
  for (size_t i = 0; i < r.table.size(); ++i)
    if (r.owned[i])
      model_.free_device(r.table[i]);
  drop_prefetch_hold(r);
  count_wasted_loads(r, 0);  // never admitted since they loaded (a dropped request)
  r.path.clear();
  r.table.clear();
  r.owned.clear();
  r.prefetched = 0;
  r.committed = 0;
  if (r.admitted) {
    KVTIER_ASSERT(admitted_ > 0);
    --admitted_;
  }
  r.admitted = false;
}

// Protected prefetches hold their prefix (device blocks among it) until their request is
// admitted. With nothing running, no finishing request will ever free blocks for the queue's
// head: let every such hold go, in request order, so that the head can be admitted.
void controller_core::release_protected_if_idle() {
  if (admitted_ > 0 || protected_blocks_ == 0)
    return;
  std::vector<request_id> holders;
  for (const auto& [id, r] : requests_)
    if (r.protected_hold)
      holders.push_back(id);
  std::sort(holders.begin(), holders.end());
  for (request_id id : holders) {
    drop_prefetch_hold(requests_.at(id));
    ++prefetch_.protected_released;
  }
}

// What a save adds over the write policy (docs/preemption.md): a block's copy is the policy's own
// when the policy backs it up at its hit count (write_through: every committed block; the
// commit that preempts queues its new blocks' backups behind the save, which takes them), unless
// the block was named by this preemption (without the save it would have stayed private, never
// copied); its store is the policy's when its copy is and the storage write policy stores it once
// that copy is ready.
void controller_core::count_marginal(const tree_node& x, bool copied, bool stored, bool named) {
  const write_decisions& policy = model_.decisions();
  // A block the policy backs up by itself, or stages through host memory to store when its
  // request finishes (cache.storage_write=always), would cross D2H anyway: the save only moves
  // that copy earlier (docs/preemption.md, "What saving costs").
  bool copied_anyway = policy.wants_backup(x.hit_count) || policy.stores_at_finish(x.hit_count);
  bool copy_added = copied && (named || !copied_anyway);
  preemption_.marginal_d2h_blocks += copy_added;
  preemption_.marginal_stored_blocks +=
    stored && (copy_added || !policy.stores_when_host_ready(x.hit_count));
}

void controller_core::preempt(request_id id, uint32_t computed_tokens,
                              std::vector<transfer_order>& orders, std::vector<uint64_t>* written) {
  request_state& r = requests_.at(id);
  r.preempted = r.preempted || r.admitted;
  if (options_.preemption != preemption_mode::recompute && r.admitted) {
    // Its full generated (unlisted) blocks get names, so that it can find them again; they join
    // the tree like any computed block, and then every computed block is saved.
    uint32_t named = saved_private_blocks(r.layout, computed_tokens, options_.block_size);
    auto held = static_cast<uint32_t>(r.table.size());
    const uint32_t listed = r.layout.listed();
    named = held > listed ? std::min(named, held - listed) : 0;
    if (named > 0) {
      name_private_blocks(id, named, options_.block_size, r.blocks);
      r.layout.list_private_blocks(named);
      preemption_.named_blocks += named;
    }
    commit_computed(r, computed_tokens, orders);
    bool store = options_.preemption == preemption_mode::save_to_storage;
    for (size_t k = 0; k < r.path.size(); ++k) {
      node_id n = r.path[k];
      const tree_node& x = model_.tree().node(n);
      if (!x.ready(tier::device))
        continue;
      size_t first = orders.size();
      bool writes = false;
      if (!model_.save_for_preemption(n, store, orders, &writes)) {
        ++preemption_.unsaved_blocks;
        continue;
      }
      ++preemption_.saved_blocks;
      if (written && writes)
        written->push_back(tracker_.storage_key_of(x.hash));
      bool copied = false;
      for (size_t i = first; i < orders.size(); ++i)
        if (orders[i].kind == transfer_kind::backup && orders[i].node == n) {
          preemption_reads_[orders[i].device_block] = orders[i].id;
          copied = true;
        }
      count_marginal(x, copied, writes, k >= listed && k < listed + named);
    }
  }
  release(r);
}

}  // namespace kvtier
