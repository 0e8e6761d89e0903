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
