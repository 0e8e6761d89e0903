#include "model/cache/cache_model.hpp"

#include <algorithm>

#include "core/check.hpp"

namespace kvtier {

cache_model::cache_model(const cache_options& options)
  : options_(options),
    decisions_(options.policy, options.write_through_threshold,
               options.host_blocks > 0 && options.caching == prefix_caching::on, options.storage,
               options.storage_tier && options.caching == prefix_caching::on,
               options.write_back_keeps_host_copy, options.storage_write_threshold),
    tree_(options.eviction),
    device_(options.device_blocks),
    host_(options.host_blocks) {
  KVTIER_ASSERT(options.write_through_threshold > 0);
}

uint32_t cache_model::device_available() const {
  return device_.free_count() + device_.retired_count() + tree_.reclaimable(tier::device);
}

// -- matching and holding -----------------------------------------------------------------------

void cache_model::match(const cache_block* blocks, size_t n, prefix_match& out) const {
  out.nodes.clear();
  out.device = out.host = out.device_idle = 0;
  out.device_tokens = out.host_tokens = 0;
  if (options_.caching == prefix_caching::off)
    return;
  bool device_run = true;
  constexpr size_t ahead = 8;
  for (size_t i = 0; i < std::min(n, ahead); ++i)
    tree_.prefetch(blocks[i].hash);
  for (size_t i = 0; i < n; ++i) {
    if (i + ahead < n)
      tree_.prefetch(blocks[i + ahead].hash);
    node_id id = tree_.find(blocks[i].hash);
    if (id == root_node)
      break;
    const tree_node& x = tree_.node(id);
    if (device_run && x.ready(tier::device)) {
      ++out.device;
      out.device_idle += radix_tree::reclaimable_copy(x, tier::device);
      out.device_tokens += x.tokens;
    } else if (!x.has(tier::device) && x.ready(tier::host)) {
      device_run = false;
      ++out.host;
      out.host_tokens += x.tokens;
    } else {
      break;  // a copy is still being filled: not usable yet
    }
    out.nodes.push_back(id);
  }
}

void cache_model::acquire_matched(const node_id* nodes, size_t n, policy_backups backups) {
  for (size_t i = 0; i < n; ++i) {
    tree_.acquire(nodes[i], true);
    if (backups != policy_backups::none)
      queue_for_hit(nodes[i]);
  }
}

void cache_model::count_hits(const node_id* nodes, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    KVTIER_ASSERT(tree_.node(nodes[i]).ref_count > 0);
    tree_.acquire(nodes[i], true);
    tree_.release(nodes[i]);  // still held: its order does not change
    queue_for_hit(nodes[i]);
  }
}

void cache_model::queue_for_hit(node_id id) {
  maybe_queue_backup(id);
  const tree_node& x = tree_.node(id);
  if (decisions_.stores_on_hit(x.hit_count) && x.ready(tier::host))
    store_queue_.emplace_back(id, x.generation);
}

void cache_model::hold(const node_id* nodes, size_t n) {
  for (size_t i = 0; i < n; ++i)
    tree_.acquire(nodes[i], false);
}

void cache_model::release(const node_id* nodes, size_t n) {
  for (size_t i = 0; i < n; ++i)
    tree_.release(nodes[i]);
}

void cache_model::release_from_tail(const std::vector<node_id>& path) {
  for (auto it = path.rbegin(); it != path.rend(); ++it)
    tree_.release(*it);
}

// -- allocation and eviction --------------------------------------------------------------------

bool cache_model::allocate_device(uint32_t n, std::vector<block_id>& out,
                                  std::vector<transfer_order>& orders) {
  uint32_t unowned = device_.free_count() + device_.retired_count();
  if (n > unowned) {
    victims_.clear();
    if (!tree_.take_evictable(tier::device, n - unowned, victims_))
      return false;
    plan_write_backs();
    for (size_t i = 0; i < victims_.size(); ++i)
      evict_device_node(victims_[i], write_back_[i] != 0, orders);
  }
  bool ok = device_.allocate(n, out, true);
  KVTIER_ASSERT(ok);
  private_device_ += n;
  return true;
}

void cache_model::free_device(block_id block) {
  KVTIER_ASSERT(private_device_ > 0);
  --private_device_;
  device_.release(block);
}

// The host tier makes room from its least recently used host-only leaves first, then from the
// copies of idle device blocks (T6): an inclusive host tier that is full of copies gives up the
// copy of its least recently used device block, which stays on the device without one. So it
// holds the copies of the blocks used last, as a host tier larger than the device does, and the
// device keeps all it holds: a host tier smaller than the device adds nothing, and costs nothing
// either (docs/design.md, "Write policies"). All or nothing.
bool cache_model::allocate_host(uint32_t n, std::vector<block_id>& out,
                                std::vector<transfer_order>& orders) {
  // Like device blocks, a host block may be handed out while a transfer still reads it (a store
  // to storage, a swap-in); the order that writes it comes after the reader and waits for it.
  uint32_t unowned = host_.free_count() + host_.retired_count();
  if (n > unowned) {
    uint32_t need = n - unowned;
    uint32_t host_only = std::min(need, tree_.reclaimable(tier::host));
    if (uint64_t{need} > uint64_t{host_only} + tree_.copies())
      return false;
    host_victims_.clear();
    if (!tree_.take_evictable(tier::host, host_only, host_victims_)) {
      // The host-only blocks sit above copies still filling: the copies must do.
      if (need > tree_.copies())
        return false;
      host_only = 0;
    }
    for (node_id id : host_victims_)
      evict_host_node(id, orders);
    for (uint32_t i = host_only; i < need; ++i)
      evict_host_copy(tree_.take_copy(), orders);
  }
  bool ok = host_.allocate(n, out, true);
  KVTIER_ASSERT(ok);
  return true;
}

uint64_t cache_model::host_room() const {
  return uint64_t{host_.free_count()} + host_.retired_count() + tree_.reclaimable(tier::host)
         + tree_.copies();
}

// write_back: a victim written back whose parent victim then finds no host room would lose its
// copy when the parent's subtree is dropped, a D2H thrown away. Host room goes to victims parents
// first (take_evictable yields leaves before the parents they uncover), and a victim without room
// is dropped before any copy of it is made. FastDeploy fails the whole allocation instead
// (docs/fastdeploy.md §2).
void cache_model::plan_write_backs() {
  write_back_.assign(victims_.size(), 0);
  if (!decisions_.host_tier || decisions_.policy != write_policy::write_back)
    return;
  uint64_t room = host_room();
  for (size_t i = victims_.size(); i-- > 0;) {
    if (tree_.node(victims_[i]).has(tier::host))
      continue;
    if (room == 0)
      break;
    --room;
    write_back_[i] = 1;
  }
}

void cache_model::evict_device_node(node_id id, bool may_write_back,
                                    std::vector<transfer_order>& orders) {
  const tree_node& x = tree_.node(id);
  KVTIER_ASSERT(x.ready(tier::device) && x.ref_count == 0);
  block_id block = x.block_in(tier::device);
  ++counters_.device_evictions;
  switch (decisions_.on_device_evict(x.has(tier::host))) {
    case device_eviction::keep_host_copy:
      tree_.renew_order(id);  // it enters the host set now, as FastDeploy's move does
      tree_.set_copy(id, tier::device, copy_state::absent);
      device_.release(block);
      return;
    case device_eviction::write_back: {
      blocks_.clear();
      if (may_write_back && allocate_host(1, blocks_, orders)) {
        // The device block is read until the D2H completes: released now, it stays retired.
        issue(transfer_kind::write_back, id, block, blocks_[0], orders);
        ++counters_.write_backs;
        tree_.set_copy(id, tier::host, copy_state::filling, blocks_[0]);
        tree_.renew_order(id);
        tree_.set_copy(id, tier::device, copy_state::absent);
        device_.release(block);
        return;
      }
      break;  // no host room: drop it
    }
    case device_eviction::drop:
      break;
  }
  tree_.set_copy(id, tier::device, copy_state::absent);
  device_.release(block);
  drop_subtree(id);
}

void cache_model::drop_subtree(node_id id) {
  // Children of a node without a device copy have none either (prefix closure), and its ref is 0,
  // so theirs are too: the whole subtree can go without orphaning anything.
  std::vector<node_id>& stack = subtree_stack_;
  std::vector<node_id>& order = subtree_order_;
  stack.assign(1, id);
  order.clear();
  while (!stack.empty()) {
    node_id x = stack.back();
    stack.pop_back();
    order.push_back(x);
    tree_.for_each_child(x, [&](node_id c) { stack.push_back(c); });
  }
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const tree_node& x = tree_.node(*it);
    KVTIER_ASSERT(x.ref_count == 0 && !x.has(tier::device));
    if (x.has(tier::host)) {
      block_id block = x.block_in(tier::host);
      tree_.set_copy(*it, tier::host, copy_state::absent);
      host_.release(block);
      if (*it != id)
        ++counters_.host_evictions;
    }
    tree_.remove(*it);
    ++counters_.dropped;
  }
}

void cache_model::evict_host_copy(node_id id, std::vector<transfer_order>& orders) {
  const tree_node& x = tree_.node(id);
  KVTIER_ASSERT(x.ready(tier::host) && x.ready(tier::device) && x.ref_count == 0);
  block_id block = x.block_in(tier::host);
  ++counters_.host_evictions;
  ++counters_.host_copies_evicted;
  if (decisions_.stores_on_host_evict() && !x.stored())
    issue_store(id, block, orders);
  tree_.set_copy(id, tier::host, copy_state::absent);
  host_.release(block);
}

void cache_model::evict_host_node(node_id id, std::vector<transfer_order>& orders) {
  const tree_node& x = tree_.node(id);
  KVTIER_ASSERT(x.ready(tier::host) && !x.has(tier::device) && x.ref_count == 0);
  block_id block = x.block_in(tier::host);
  ++counters_.host_evictions;
  if (decisions_.stores_on_host_evict() && !x.stored())
    issue_store(id, block, orders);
  tree_.set_copy(id, tier::host, copy_state::absent);
  host_.release(block);
  tree_.remove(id);
  ++counters_.dropped;
}

// -- copies -------------------------------------------------------------------------------------

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
        if (same_node && x.state(tier::host) == copy_state::filling && x.block[1] == o.host_block) {
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
      KVTIER_ASSERT(same_node && x.state(tier::device) == copy_state::filling);  // held by its request
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

void cache_model::reset() {
  KVTIER_ASSERT(outstanding_.empty());
  tree_.reset();
  device_.reset();
  host_.reset();
  private_device_ = 0;
  backup_queue_.clear();
  store_after_fill_.clear();
  staging_stores_.clear();
  store_queue_.clear();
}

}  // namespace kvtier
