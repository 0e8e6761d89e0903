#include "model/cache/radix_tree.hpp"

#include <algorithm>

#include "core/check.hpp"

namespace kvtier {

const char* to_string(eviction_policy p) {
  return p == eviction_policy::lru ? "lru" : "lfu";
}

namespace {

constexpr int device_index = node_tier(tier::device);
constexpr int host_index = node_tier(tier::host);

}  // namespace

// A node entering a set gets a queue entry; one leaving it leaves its entry behind, stale.
void radix_tree::apply_membership(node_id id, unsigned want, unsigned diff) {
  nodes_[id].set_membership(want);  // before any push: a compaction keeps only current entries
  for (int t = 0; t < node_tier_count; ++t) {
    if (diff & (tree_node::counted_device << t))
      reclaimable_[t] += (want & (tree_node::counted_device << t)) ? 1 : -1;
    if (diff & (tree_node::in_device_set << t)) {
      if (want & (tree_node::in_device_set << t))
        push(id, t);
      else
        --set_count_[t];
    }
  }
  if (diff & tree_node::in_copy_set) {
    if (!(want & tree_node::in_copy_set)) {
      --copies_count_;
      return;
    }
    ++copies_count_;
    if (!copies_queued_)
      return;
    copies_.push(key_of(id));
    if (copies_.size() > 2 * size_t{copies_count_} + 1024)
      compact_copies();
  }
}

radix_tree::radix_tree(eviction_policy policy) : policy_(policy) {
  reset();
}

void radix_tree::reserve(uint32_t nodes) {
  nodes_.reserve(size_t{nodes} + 1);
  by_hash_.reserve(nodes);
}

void radix_tree::reset() {
  nodes_.clear();
  nodes_.emplace_back();
  nodes_[root_node].set_live(true);
  free_slots_.clear();
  by_hash_.clear();
  for (int t = 0; t < node_tier_count; ++t) {
    queue_[t].clear();
    set_count_[t] = 0;
    reclaimable_[t] = 0;
  }
  copies_.clear();
  copies_queued_ = false;
  copies_count_ = 0;
  live_count_ = 0;
  next_order_ = 1;
  if (sink_)
    sink_->cleared();
}

node_id radix_tree::find(block_hash hash) const {
  auto it = by_hash_.find(hash);
  return it == by_hash_.end() ? root_node : it->second;
}

std::vector<node_id> radix_tree::live_nodes() const {
  std::vector<node_id> out;
  out.reserve(live_count_);
  for (node_id i = 1; i < nodes_.size(); ++i)
    if (nodes_[i].live())
      out.push_back(i);
  return out;
}

node_id radix_tree::add(node_id parent, block_hash hash, uint32_t tokens) {
  bool added = false;
  node_id id = find_or_add(parent, hash, tokens, added);
  KVTIER_ASSERT(added);
  return id;
}

node_id radix_tree::find_or_add(node_id parent, block_hash hash, uint32_t tokens, bool& added) {
  KVTIER_ASSERT(nodes_[parent].live());
  KVTIER_ASSERT(tokens <= UINT16_MAX);
  node_id id = free_slots_.empty() ? static_cast<node_id>(nodes_.size()) : free_slots_.back();
  auto [it, inserted] = by_hash_.try_emplace(hash, id);
  added = inserted;
  if (!inserted)
    return it->second;
  if (id == nodes_.size())
    nodes_.emplace_back();
  else
    free_slots_.pop_back();
  tree_node& n = nodes_[id];
  KVTIER_ASSERT(!n.live() && !n.in_set(0) && !n.in_set(1) && !n.in_copies());
  uint32_t generation = n.generation + 1;
  n = tree_node{};
  n.generation = generation;
  n.hash = hash;
  n.parent = parent;
  n.tokens = static_cast<uint16_t>(tokens);
  n.hit_count = 1;
  n.release_order = next_order_++;  // keys stay unique even for a node never held: the old
                                    // entries of the slot's earlier node go stale
  n.set_live(true);
  tree_node& p = nodes_[parent];
  n.next_sibling = p.first_child;
  if (p.first_child != root_node)
    nodes_[p.first_child].prev_sibling = id;
  p.first_child = id;
  ++p.children;
  ++live_count_;
  update(parent);  // the parent is no longer a leaf
  return id;
}

void radix_tree::remove(node_id id) {
  KVTIER_ASSERT(id != root_node);
  tree_node& n = nodes_[id];
  KVTIER_ASSERT(n.live());
  KVTIER_ASSERT(n.children == 0);
  KVTIER_ASSERT(n.ref_count == 0);
  KVTIER_ASSERT(!n.has(tier::device) && !n.has(tier::host));
  tree_node& p = nodes_[n.parent];
  if (n.prev_sibling != root_node)
    nodes_[n.prev_sibling].next_sibling = n.next_sibling;
  else
    p.first_child = n.next_sibling;
  if (n.next_sibling != root_node)
    nodes_[n.next_sibling].prev_sibling = n.prev_sibling;
  // A node chosen for host eviction was already counted out of its parent's children.
  const bool parent_changes = !n.taken(host_index);
  if (parent_changes) {
    KVTIER_ASSERT(p.children > 0);
    --p.children;
  }
  by_hash_.erase(n.hash);
  node_id parent = n.parent;
  KVTIER_ASSERT(!n.in_set(0) && !n.in_set(1) && !n.in_copies());  // no copies, so in no set
  n.set_live(false);
  n.set_taken(0, false);
  n.set_taken(1, false);
  n.first_child = n.next_sibling = n.prev_sibling = root_node;
  --live_count_;
  free_slots_.push_back(id);
  if (parent_changes)
    update(parent);
}

void radix_tree::set_copy(node_id id, tier t, copy_state st, block_id block) {
  KVTIER_ASSERT(id != root_node);
  tree_node& n = nodes_[id];
  KVTIER_ASSERT(n.live());
  int ti = node_tier(t);
  bool had = n.state_at(ti) != copy_state::absent;
  bool has = st != copy_state::absent;
  // A node taken for device eviction was counted out of its parent's device children then.
  const bool parent_changes = t == tier::device && had != has && !n.taken(device_index);
  if (parent_changes) {
    tree_node& p = nodes_[n.parent];
    if (has) {
      ++p.device_children;
    } else {
      KVTIER_ASSERT(p.device_children > 0);
      --p.device_children;
    }
  }
  // A node taken for device eviction can only lose its device copy; a node taken for host
  // eviction keeps its mark until remove(), which must not count it out of its parent twice.
  KVTIER_ASSERT(!(t == tier::device && n.taken(device_index) && has));
  if (sink_)
    report_copy(id, t, n.state_at(ti) == copy_state::ready, st == copy_state::ready);
  n.set_state_at(ti, st);
  if (has)
    n.block[ti] = block;
  if (t == tier::device && !has)
    n.set_taken(device_index, false);
  update(id);
  if (parent_changes)
    update(n.parent);
}

void radix_tree::report_copy(node_id id, tier t, bool was_ready, bool is_ready) {
  if (was_ready == is_ready)
    return;
  const tree_node& n = nodes_[id];
  if (!is_ready) {
    sink_->removed(t, n.hash);
    return;
  }
  std::optional<block_hash> parent;
  if (n.parent != root_node)
    parent = nodes_[n.parent].hash;
  sink_->stored(t, n.hash, parent, n.tokens);
}

void radix_tree::acquire(node_id id, bool hit) {
  KVTIER_ASSERT(id != root_node);
  tree_node& n = nodes_[id];
  KVTIER_ASSERT(n.live());
  ++n.ref_count;
  if (hit)
    ++n.hit_count;
  update(id);
}

void radix_tree::release(node_id id) {
  KVTIER_ASSERT(id != root_node);
  tree_node& n = nodes_[id];
  KVTIER_ASSERT(n.live());
  KVTIER_ASSERT(n.ref_count > 0);
  if (--n.ref_count == 0)
    n.release_order = next_order_++;
  update(id);
}

void radix_tree::renew_order(node_id id) {
  tree_node& n = nodes_[id];
  KVTIER_ASSERT(n.live() && !n.in_set(0) && !n.in_set(1) && !n.in_copies());
  n.release_order = next_order_++;
}

bool radix_tree::current_copy(const evictable_queue::entry& e) const {
  const tree_node& n = nodes_[e.id];
  return n.live() && n.in_copies() && same_key(e);
}

// Keeps one entry per member (seen_: a byte per node, cleared per sweep: small enough to stay
// in the cache the sweep works in).
void radix_tree::compact_copies() {
  seen_.assign(nodes_.size(), 0);
  copies_.compact(
    [&](const evictable_queue::entry& e) {
      if (!current_copy(e) || seen_[e.id])
        return false;
      seen_[e.id] = 1;
      return true;
    },
    [&](uint32_t id) { prefetch_node(id); });
}

// The members' entries, pushed in key order (so all to the queue's in-order part).
void radix_tree::queue_copies() {
  std::vector<evictable_queue::entry> members;
  members.reserve(copies_count_);
  for (node_id id = 1; id < nodes_.size(); ++id)
    if (nodes_[id].in_copies())
      members.push_back(key_of(id));
  std::sort(members.begin(), members.end(), evictable_queue::before);
  copies_.clear();
  for (const evictable_queue::entry& e : members)
    copies_.push(e);
  copies_queued_ = true;
}

node_id radix_tree::take_copy() {
  if (!copies_queued_)
    queue_copies();
  evictable_queue::entry e;
  if (!copies_.pop([&](const evictable_queue::entry& x) { return current_copy(x); }, e))
    return root_node;
  // The copy set gives it up; the caller drops its host copy next (which leaves it out).
  nodes_[e.id].set_membership(nodes_[e.id].membership() & ~tree_node::in_copy_set);
  --copies_count_;
  return e.id;
}

node_id radix_tree::peek_copy() const {
  if (!copies_queued_) {
    node_id best = root_node;
    for (node_id id = 1; id < nodes_.size(); ++id)
      if (nodes_[id].in_copies()
          && (best == root_node || evictable_queue::before(key_of(id), key_of(best))))
        best = id;
    return best;
  }
  const evictable_queue::entry* best = nullptr;
  copies_.for_each([&](const evictable_queue::entry& e) {
    if (current_copy(e) && (!best || evictable_queue::before(e, *best)))
      best = &e;
  });
  return best ? best->id : root_node;
}

uint32_t radix_tree::live_entries(tier t) const {
  int ti = node_tier(t);
  std::vector<uint8_t> seen(nodes_.size(), 0);
  uint32_t n = 0;
  queue_[ti].for_each([&](const evictable_queue::entry& e) {
    if (current(e, ti) && !seen[e.id]) {
      seen[e.id] = 1;
      ++n;
    }
  });
  return n;
}

node_id radix_tree::peek_victim(tier t) const {
  int ti = node_tier(t);
  const evictable_queue::entry* best = nullptr;
  queue_[ti].for_each([&](const evictable_queue::entry& e) {
    if (current(e, ti) && (!best || evictable_queue::before(e, *best)))
      best = &e;
  });
  return best ? best->id : root_node;
}

bool radix_tree::pop(int t, node_id& out) {
  evictable_queue::entry e;
  if (!queue_[t].pop([&](const evictable_queue::entry& x) { return current(x, t); }, e,
                     [&](node_id far, node_id near) {
                       prefetch_node(far);
                       const tree_node& n = nodes_[near];  // loaded since it was `far`
                       prefetch_node(n.parent);
                       if (leaves_index(n, t))
                         by_hash_.prefetch(n.hash);
                     }))
    return false;
  out = e.id;
  return true;
}

void radix_tree::compact(int t) {
  seen_.assign(nodes_.size(), 0);
  queue_[t].compact(
    [&](const evictable_queue::entry& e) {
      if (!current(e, t) || seen_[e.id])
        return false;
      seen_[e.id] = 1;
      return true;
    },
    [&](uint32_t id) { prefetch_node(id); });
  KVTIER_ASSERT(queue_[t].size() == set_count_[t]);
}

bool radix_tree::take_evictable(tier t, uint32_t n, std::vector<node_id>& out) {
  int ti = node_tier(t);
  if (n == 0)
    return true;
  if (reclaimable_[ti] < n)
    return false;
  size_t first = out.size();
  node_id next = root_node;  // a parent uncovered as the next victim, not queued
  while (out.size() - first < n) {
    node_id id = next;
    next = root_node;
    if (id == root_node && !pop(ti, id)) {
      // Reclaimable nodes exist but sit above copies still being filled: give everything back.
      for (size_t i = out.size(); i > first; --i)
        untake(out[i - 1], ti);
      out.resize(first);
      return false;
    }
    tree_node& x = nodes_[id];
    x.set_taken(ti, true);
    update(id);  // out of the set (its entry was just popped), the counts and the copy set
    tree_node& p = nodes_[x.parent];
    if (t == tier::device) {
      --p.device_children;
    } else {
      --p.children;
    }
    // A request's path is released from its tail, so its parent, now a leaf, usually carries
    // the next key: when it comes before every queued entry it is the next victim, taken
    // without a trip through the queue (its membership then changes once, in the next round).
    // The victims and their order are those of push and pop.
    if (out.size() + 1 - first < n && x.parent != root_node
        && (derived_membership(p) & (tree_node::in_device_set << ti))
        && queue_[ti].before_all(key_of(x.parent)))
      next = x.parent;
    else
      update(x.parent);
    // The evicted node leaves the hash map soon; its parent, now perhaps a leaf, is often the
    // next victim.
    if (leaves_index(x, ti))
      by_hash_.prefetch(x.hash);
    if (leaves_index(p, ti))
      by_hash_.prefetch(p.hash);
    prefetch_node(p.parent);
    out.push_back(id);
  }
  return true;
}

bool radix_tree::take_member(node_id id, tier t) {
  int ti = node_tier(t);
  tree_node& x = nodes_[id];
  if (id == root_node || !x.in_set(ti))
    return false;
  x.set_taken(ti, true);
  update(id);  // its queue entry goes stale
  tree_node& p = nodes_[x.parent];
  if (t == tier::device)
    --p.device_children;
  else
    --p.children;
  update(x.parent);
  return true;
}

void radix_tree::untake(node_id id, int t) {
  tree_node& x = nodes_[id];
  KVTIER_ASSERT(x.taken(t));
  tree_node& p = nodes_[x.parent];
  if (t == device_index)
    ++p.device_children;
  else
    ++p.children;
  x.set_taken(t, false);
  update(x.parent);
  update(id);
}

}  // namespace kvtier
