// The cache model's copies (cache_model.hpp, "The life of a request's block"): the orders it
// issues for swap-ins, backups, write-backs, loads and stores, what a block's commit queues,
// and what completing or failing an order settles. Allocation, eviction and holds are in
// cache_model.cpp.

#include <algorithm>

#include "core/check.hpp"
#include "model/cache/cache_model.hpp"

namespace kvtier {

void cache_model::issue_store(node_id id, block_id host_block,
                              std::vector<transfer_order>& orders) {
  issue(transfer_kind::store, id, 0, host_block, orders);
  tree_.mark_stored(id);
  ++counters_.stores;
}

transfer_order& cache_model::issue(transfer_kind kind, node_id node, block_id device_block,
                                   block_id host_block, std::vector<transfer_order>& orders) {
  const tree_node& x = tree_.node(node);
  transfer_order o;
  o.id = next_order_id_++;
  o.kind = kind;
  o.node = node;
  o.generation = x.generation;
  o.hash = x.hash;
  o.tokens = x.tokens;
  o.device_block = device_block;
  o.host_block = host_block;
  bool uses_device = kind == transfer_kind::backup || kind == transfer_kind::write_back
                     || kind == transfer_kind::swap_in;
  if (uses_device)
    device_.pin(device_block);
  host_.pin(host_block);
  outstanding_.add(o);
  orders.push_back(o);
  return orders.back();
}

void cache_model::swap_in(node_id id, block_id device_block, std::vector<transfer_order>& orders) {
  const tree_node& x = tree_.node(id);
  KVTIER_ASSERT(x.ref_count > 0);
  KVTIER_ASSERT(x.ready(tier::host) && !x.has(tier::device));
  KVTIER_ASSERT(x.parent == root_node || tree_.node(x.parent).has(tier::device));
  KVTIER_ASSERT(private_device_ > 0);
  --private_device_;
  issue(transfer_kind::swap_in, id, device_block, x.block_in(tier::host), orders);
  tree_.set_copy(id, tier::device, copy_state::filling, device_block);
  ++counters_.swap_ins;
}

commit_result cache_model::commit(node_id parent, const cache_block& block,
                                  block_id device_block, std::vector<transfer_order>&,
                                  policy_backups backups) {
  KVTIER_ASSERT(parent == root_node || tree_.node(parent).has(tier::device));
  commit_result r;
  bool added = false;
  r.node = tree_.find_or_add(parent, block.hash, block.tokens, added);
  const tree_node& x = tree_.node(r.node);
  KVTIER_ASSERT(x.parent == parent);  // chained hashes name their parent
  // Held before its copy turns ready: an unheld ready leaf would join the evictable set only to
  // leave it at once, a queue entry pushed for nothing and swept later.
  tree_.acquire(r.node, false);
  if (!x.has(tier::device)) {
    KVTIER_ASSERT(private_device_ > 0);
    --private_device_;
    tree_.set_copy(r.node, tier::device, copy_state::ready, device_block);
    r.adopted = true;
  }
  if (r.adopted && backups == policy_backups::by_policy)
    maybe_queue_backup(r.node);
  return r;
}

std::optional<node_id> cache_model::begin_load(node_id parent, const cache_block& block,
                                               std::vector<transfer_order>& orders) {
  if (tree_.find(block.hash) != root_node)
    return std::nullopt;
  blocks_.clear();
  if (!allocate_host(1, blocks_, orders))
    return std::nullopt;
  node_id id = tree_.add(parent, block.hash, block.tokens);
  tree_.acquire(id, false);
  tree_.mark_stored(id);  // storage holds it: found there
  issue(transfer_kind::load, id, 0, blocks_[0], orders);
  tree_.set_copy(id, tier::host, copy_state::filling, blocks_[0]);
  ++counters_.loads;
  return id;
}

void cache_model::maybe_queue_backup(node_id id) {
  const tree_node& x = tree_.node(id);
  if (x.ready(tier::device) && !x.has(tier::host) && decisions_.wants_backup(x.hit_count))
    backup_queue_.emplace_back(id, x.generation);
}

void cache_model::collect_backups(std::vector<transfer_order>& orders) {
  // Stores earned by hits first (write_through_selective): their host copies are ready now.
  for (auto [id, generation] : store_queue_) {
    const tree_node& x = tree_.node(id);
    if (!x.live() || x.generation != generation || !x.ready(tier::host) || x.stored())
      continue;
    issue_store(id, x.block_in(tier::host), orders);
  }
  store_queue_.clear();
  // The queue is in commit and match order, so parents come before their children; a child some
  // request holds whose parent has no host copy yet is queued again when the parent's backup
  // starts. A block nobody holds is not: backups are for the blocks requests use, and a block
  // whose copy the host tier gave up (allocate_host) waits for its next use.
  auto wants = [&](node_id id, uint32_t generation) {
    const tree_node& x = tree_.node(id);
    return x.live() && x.generation == generation && x.ready(tier::device) && !x.has(tier::host);
  };
  for (size_t i = 0; i < backup_queue_.size(); ++i) {
    auto [id, generation] = backup_queue_[i];
    const tree_node& x = tree_.node(id);
    if (!wants(id, generation))
      continue;
    if (x.parent != root_node && !tree_.node(x.parent).has(tier::host))
      continue;
    blocks_.clear();
    if (!allocate_host(1, blocks_, orders)) {
      // The host tier is full of held copies: a later use queues them again. Each block the
      // round still wanted counts once (a child can be queued twice).
      victims_.clear();
      for (size_t j = i; j < backup_queue_.size(); ++j)
        if (wants(backup_queue_[j].first, backup_queue_[j].second))
          victims_.push_back(backup_queue_[j].first);
      std::sort(victims_.begin(), victims_.end());
      counters_.backups_skipped +=
        std::unique(victims_.begin(), victims_.end()) - victims_.begin();
      break;
    }
    issue(transfer_kind::backup, id, x.block_in(tier::device), blocks_[0], orders);
    tree_.set_copy(id, tier::host, copy_state::filling, blocks_[0]);
    ++counters_.backups;
    tree_.for_each_child(id, [&](node_id c) {
      if (tree_.node(c).ref_count > 0)
        maybe_queue_backup(c);
    });
  }
  backup_queue_.clear();
}

bool cache_model::save_for_preemption(node_id id, bool store,
                                      std::vector<transfer_order>& orders, bool* writes) {
  const tree_node& x = tree_.node(id);
  if (writes)
    *writes = false;
  KVTIER_ASSERT(x.ref_count > 0 && x.ready(tier::device));
  if (x.ready(tier::host)) {
    // Under storage_write=always it was stored when its host copy became ready. A preemption
    // stores even a block stored before: the pool may have evicted it since (a put of a block
    // it holds writes nothing).
    if (store && !decisions_.stores_when_host_ready(x.hit_count)) {
      issue_store(id, x.block_in(tier::host), orders);
      ++counters_.preemption_stores;
      if (writes)
        *writes = true;
    }
    return true;
  }
  if (x.has(tier::host)) {
    // Its backup is in flight: store once it lands.
    if (store)
      outstanding_.for_each([&](const transfer_order& o) {
        if (o.node == id && o.generation == x.generation && o.host_block == x.block_in(tier::host)
            && (o.kind == transfer_kind::backup || o.kind == transfer_kind::write_back))
          store_after_fill_.emplace(o.id, store_reason::preemption);
      });
    if (writes)
      *writes = store;
    return true;
  }
  blocks_.clear();
  if (!allocate_host(1, blocks_, orders))
    return false;
  transfer_order& o = issue(transfer_kind::backup, id, x.block_in(tier::device), blocks_[0], orders);
  if (store)
    store_after_fill_.emplace(o.id, store_reason::preemption);
  if (writes)
    *writes = store;
  tree_.set_copy(id, tier::host, copy_state::filling, blocks_[0]);
  ++counters_.backups;
  ++counters_.preemption_backups;
  return true;
}

void cache_model::complete(const transfer_order& order, std::vector<transfer_order>& orders) {
  transfer_order o = outstanding_.take(order.id);
  const tree_node& x = tree_.node(o.node);
  bool same_node = x.live() && x.generation == o.generation;
  switch (o.kind) {
    case transfer_kind::backup:
    case transfer_kind::write_back:
    case transfer_kind::load:
      if (o.kind != transfer_kind::load)
        device_.unpin(o.device_block);
      host_.unpin(o.host_block);
      {
        // Stores waiting on a fill are rare: most completions skip the lookup.
        auto after = store_after_fill_.empty() ? store_after_fill_.end()
                                               : store_after_fill_.find(o.id);
        bool asked = after != store_after_fill_.end();
        bool preemption_store = asked && after->second == store_reason::preemption;
        bool staging = asked && after->second == store_reason::staging;
        if (asked)
          store_after_fill_.erase(after);
        if (same_node && x.state(tier::host) == copy_state::filling
            && x.block_in(tier::host) == o.host_block) {
          tree_.set_copy(o.node, tier::host, copy_state::ready, o.host_block);
          bool due = !x.stored() && (decisions_.stores_when_host_ready(x.hit_count) || asked);
          if (o.kind != transfer_kind::load && (due || preemption_store)) {
            issue_store(o.node, o.host_block, orders);
            counters_.preemption_stores += preemption_store;
            if (staging)
              staging_stores_.insert(orders.back().id);
          }
        }
      }
      return;
    case transfer_kind::swap_in: {
      device_.unpin(o.device_block);
      host_.unpin(o.host_block);
      // Held by its request, so still this node.
      KVTIER_ASSERT(same_node && x.state(tier::device) == copy_state::filling);
      tree_.set_copy(o.node, tier::device, copy_state::ready, o.device_block);
      if (!decisions_.keeps_host_copy_after_swap_in()) {
        block_id host_block = x.block_in(tier::host);
        tree_.set_copy(o.node, tier::host, copy_state::absent);
        host_.release(host_block);
      }
      return;
    }
    case transfer_kind::store:
      host_.unpin(o.host_block);
      if (!staging_stores_.empty() && staging_stores_.erase(o.id) > 0)
        free_staged_copy(o);
      return;
    case transfer_kind::fill:  // the controller's (--verify), never an order of the model
      KVTIER_ASSERT(false);
  }
}

void cache_model::store_finished(const node_id* nodes, size_t n,
                                 std::vector<transfer_order>& orders) {
  for (size_t i = 0; i < n; ++i) {
    const tree_node& x = tree_.node(nodes[i]);
    if (x.stored() || !x.ready(tier::device) || !decisions_.stores_at_finish(x.hit_count))
      continue;
    if (x.ready(tier::host)) {
      issue_store(nodes[i], x.block_in(tier::host), orders);
      continue;
    }
    if (x.has(tier::host)) {
      // Its backup is in flight; complete() stores it when the host copy is ready.
      if (!decisions_.stores_when_host_ready(x.hit_count))
        outstanding_.for_each([&](const transfer_order& o) {
          if (o.node == nodes[i] && o.generation == x.generation
              && o.host_block == x.block_in(tier::host) && o.kind == transfer_kind::backup)
            store_after_fill_.emplace(o.id, store_reason::finish);
        });
      continue;
    }
    blocks_.clear();
    if (!allocate_host(1, blocks_, orders)) {
      counters_.finish_stores_skipped += n - i;
      return;  // host memory is full of pinned copies: the rest is not staged either
    }
    transfer_order& o =
      issue(transfer_kind::backup, nodes[i], x.block_in(tier::device), blocks_[0], orders);
    store_after_fill_.emplace(o.id, store_reason::staging);
    tree_.set_copy(nodes[i], tier::host, copy_state::filling, blocks_[0]);
    ++counters_.staged_stores;
    ++counters_.backups;  // a D2H copy like any backup: the link moves its bytes
  }
}

// A staged host copy goes once the store has read it, unless the host policy wants it kept (a
// backup would copy it again) or it is the block's last copy (the device copy was evicted
// meanwhile: it is an ordinary host copy now). A device copy still filling is a swap-in reading
// this host copy: the copy is the swap-in's to keep or free when it lands (docs/design.md,
// "Write policies"), so only a ready device copy lets the store free it.
void cache_model::free_staged_copy(const transfer_order& store) {
  const tree_node& x = tree_.node(store.node);
  if (!x.live() || x.generation != store.generation || !x.ready(tier::host)
      || x.block_in(tier::host) != store.host_block || !x.ready(tier::device)
      || decisions_.wants_backup(x.hit_count))
    return;
  tree_.set_copy(store.node, tier::host, copy_state::absent);
  host_.release(store.host_block);
}

void cache_model::fail(const transfer_order& order) {
  transfer_order o = outstanding_.take(order.id);
  KVTIER_ASSERT(o.kind == transfer_kind::load);
  host_.unpin(o.host_block);
  const tree_node& x = tree_.node(o.node);
  if (x.live() && x.generation == o.generation && x.state(tier::host) == copy_state::filling
      && x.block[1] == o.host_block) {
    tree_.set_copy(o.node, tier::host, copy_state::absent);
    host_.release(o.host_block);
  }
}

void cache_model::discard_if_bare(node_id id, uint32_t generation) {
  const tree_node& x = tree_.node(id);
  if (!x.live() || x.generation != generation || x.has(tier::device) || x.has(tier::host)
      || x.ref_count > 0 || x.children > 0)
    return;
  tree_.remove(id);
}

std::optional<node_id> cache_model::pass_through_device(node_id parent, const cache_block& block,
                                                        std::vector<transfer_order>& orders,
                                                        bool found) {
  const uint32_t hits = found ? 2 : 1;
  bool keeps_copy = decisions_.wants_backup(hits)
                    || decisions_.on_device_evict(false) == device_eviction::write_back;
  if (!keeps_copy || tree_.find(block.hash) != root_node)
    return std::nullopt;
  blocks_.clear();
  if (!allocate_host(1, blocks_, orders))
    return std::nullopt;
  node_id id = tree_.add(parent, block.hash, block.tokens);
  tree_.acquire(id, found);
  tree_.set_copy(id, tier::host, copy_state::ready, blocks_[0]);
  if (decisions_.policy == write_policy::write_back)
    ++counters_.write_backs;
  else
    ++counters_.backups;
  if (decisions_.stores_when_host_ready(hits))
    issue_store(id, blocks_[0], orders);
  return id;
}

}  // namespace kvtier
