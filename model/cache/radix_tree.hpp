#pragma once

// The block index: a radix tree with one node per cache block, keyed by chained block hash.
// Because a hash already names its whole prefix, one flat map from hash to node finds any node;
// the parent links give the tree.
//
// Each node carries a copy state per tier (absent, filling, ready). "Filling" means a transfer
// is writing that copy; only ready copies match. Invariants (check_invariants() verifies them):
//  T1 links: every node but the root has a live parent that lists it as a child; `children`
//     and `device_children` equal the counts of such children (with a device copy for the latter).
//  T2 prefix closure: a node has a parent in the tree; a node with a device copy (filling or
//     ready) has a parent with a device copy, or the root. So eviction never orphans a subtree.
//  T3 path refs: a request holds every node on its path, so ref(parent) >= ref(child).
//  T4 evictable sets, exactly: a node is in the device set iff its device copy is ready, its ref
//     is 0 and no child has a device copy (a device leaf); it is in the host set iff its host
//     copy is ready, it has no device copy, its ref is 0 and it has no children (a leaf).
//     Only leaves are ever evicted, and an evicted parent that becomes a leaf joins its set.
//  T5 order: a set yields its members by key: LRU keys by the order in which the node last
//     became unreferenced (ref 1 -> 0) or moved to the host tier (FastDeploy's "time it became
//     evictable", not its last access); LFU keys by (hit count, that order). Keys are unique,
//     so eviction order is total and deterministic.
//  T6 host copies of device blocks: a node is in the copy set iff its device and host copies
//     are both ready, its ref is 0 and neither copy is taken for eviction. The host tier gives
//     up such a copy (the device keeps the block) only when it has no host-only block left to
//     evict (docs/design.md, "Write policies"); the set yields them by the key of T5.

#include <cstdint>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "core/huge_page_allocator.hpp"

#include "model/cache/block_events.hpp"
#include "core/block_hash.hpp"
#include "core/tier.hpp"
#include "model/cache/block_pool.hpp"
#include "model/cache/evictable_queue.hpp"

namespace kvtier {

using node_id = uint32_t;

/// The root stands for the empty prefix; it holds no block and is never evicted.
inline constexpr node_id root_node = 0;

/// A node holds copies in the device and host tiers only: a block's storage copy is the storage
/// pool's, found by key (model/storage/storage_index.hpp), and it outlives the node, so the tree
/// keeps no state for it. Its per-tier fields are indexed by node_tier(t), device or host.
inline constexpr int node_tier_count = 2;
constexpr int node_tier(tier t) { return static_cast<int>(t); }
static_assert(node_tier(tier::device) == 0 && node_tier(tier::host) == 1);

enum class copy_state : uint8_t { absent, filling, ready };

enum class eviction_policy : uint8_t { lru, lfu };
const char* to_string(eviction_policy p);

/// One node is one cache line, aligned (an 80-byte node spans two). Its flags are bits, and
/// the evictable sets check their entries by key, not by a stamp per tier: a replay spends most
/// of its instructions keeping the sets and counts in step with the nodes, and with the flags
/// in one word that is one small computation per change (radix_tree::derived_membership;
/// BENCHMARKS.md, "The per-block path, third pass").
struct alignas(64) tree_node {
  block_hash hash = 0;
  uint64_t release_order = 0;    // LRU key, see T5
  node_id parent = root_node;
  node_id first_child = root_node;  // root_node = none (the root is nobody's child)
  node_id next_sibling = root_node;
  node_id prev_sibling = root_node;
  uint32_t children = 0;
  uint32_t device_children = 0;  // children whose device copy is filling or ready
  uint32_t ref_count = 0;
  uint32_t hit_count = 0;        // 1 when created, +1 per match that holds it (FastDeploy)
  uint32_t generation = 0;       // bumps when the slot is reused for another block
  block_id block[node_tier_count] = {0, 0};  // meaningful while the copy in a tier is not absent
  uint16_t tokens = 0;

  copy_state state(tier t) const { return state_at(node_tier(t)); }
  copy_state state_at(int t) const {
    return static_cast<copy_state>((flags_ >> (2 * t)) & 3u);
  }
  void set_state_at(int t, copy_state s) {
    flags_ = static_cast<uint16_t>((flags_ & ~(3u << (2 * t)))
                                   | (static_cast<unsigned>(s) << (2 * t)));
  }
  bool has(tier t) const { return state(t) != copy_state::absent; }
  bool ready(tier t) const { return state(t) == copy_state::ready; }
  block_id block_in(tier t) const { return block[node_tier(t)]; }
  /// In tier t's evictable set (T4).
  bool in_set(int t) const { return membership() & (in_device_set << t); }
  /// Chosen for eviction from tier t, not yet dropped.
  bool taken(int t) const { return bit(taken_bit + t); }
  void set_taken(int t, bool v) { set_bit(taken_bit + t, v); }
  /// In the copy set (T6).
  bool in_copies() const { return membership() & in_copy_set; }
  bool live() const { return bit(live_bit); }
  void set_live(bool v) { set_bit(live_bit, v); }
  /// A store of this block to storage was issued (the storage pool may have evicted it since);
  /// the storage decision at request finish stores a block once (docs/design.md).
  bool stored() const { return bit(stored_bit); }
  void set_stored(bool v) { set_bit(stored_bit, v); }

  /// Where the tree counts the node: the bits of membership(). The tree keeps them equal to
  /// what the node's state says (radix_tree::derived_membership) after every change.
  enum : unsigned {
    counted_device = 1,  // in reclaimable(device)
    counted_host = 2,    // in reclaimable(host)
    in_device_set = 4,   // in the device evictable set (T4); in_device_set << 1: the host's
    in_host_set = 8,
    in_copy_set = 16,    // in the copy set (T6)
  };
  unsigned membership() const { return (flags_ >> membership_shift) & 31u; }
  void set_membership(unsigned m) {
    flags_ = static_cast<uint16_t>((flags_ & ~(31u << membership_shift)) | (m << membership_shift));
  }

 private:
  // Bits 0-3: the copy state of each tier, two bits each; 4-8: membership(); then these.
  enum : unsigned { membership_shift = 4, taken_bit = 9, live_bit = 11, stored_bit = 12 };
  bool bit(unsigned b) const { return (flags_ >> b) & 1u; }
  void set_bit(unsigned b, bool v) {
    flags_ = static_cast<uint16_t>(v ? flags_ | (1u << b) : flags_ & ~(1u << b));
  }
  uint16_t flags_ = 0;
};
static_assert(sizeof(tree_node) == 64, "one node, one cache line: the index is memory-bound");

class radix_tree {
 public:
  explicit radix_tree(eviction_policy policy = eviction_policy::lru);
  /// Makes room for `nodes` nodes up front (the tiers' capacity bounds the live nodes), so that
  /// neither the node array nor the hash map grows while requests run. Changes no result: node
  /// ids come from the free list and the array's end as before.
  void reserve(uint32_t nodes);

  // -- observers ------------------------------------------------------------------------------

  const tree_node& node(node_id id) const { return nodes_[id]; }
  eviction_policy policy() const { return policy_; }
  /// Number of blocks in the tree (the root excluded).
  uint32_t size() const { return live_count_; }
  /// Node of `hash`, or root_node if the tree has none.
  node_id find(block_hash hash) const;
  /// Starts loading what find(hash) will touch (the index is memory-bound: callers walking a
  /// request's blocks prefetch a few ahead).
  void prefetch(block_hash hash) const { by_hash_.prefetch(hash); }
  /// Starts loading node `id` (callers working through a batch of nodes prefetch a few ahead).
  void prefetch_node(node_id id) const {
    const char* p = reinterpret_cast<const char*>(&nodes_[id]);
    __builtin_prefetch(p);
    __builtin_prefetch(p + sizeof(tree_node) - 1);
  }
  /// Members of a tier's evictable set (the leaves that may go now).
  uint32_t evictable(tier t) const { return set_count_[node_tier(t)]; }
  /// Blocks a tier could free by evicting leaf after leaf: device: ready and unreferenced;
  /// host: ready, host-only and unreferenced.
  uint32_t reclaimable(tier t) const { return reclaimable_[node_tier(t)]; }
  /// Whether n's copy in t counts in reclaimable(t).
  static bool reclaimable_copy(const tree_node& n, tier t) {
    return derived_membership(n) & (tree_node::counted_device << node_tier(t));
  }
  /// The membership bits (tree_node::membership) that n's state calls for: T4, T6 and the
  /// reclaimable counts. All of them are a function of the node alone (its holders, copies,
  /// marks and child counts), so one look at it after each change keeps every set and count in
  /// step (update).
  static unsigned derived_membership(const tree_node& n) {
    if (n.ref_count != 0 || !n.live())
      return 0;
    const copy_state device = n.state_at(0), host = n.state_at(1);
    const bool device_ready = device == copy_state::ready && !n.taken(0);
    const bool host_ready = host == copy_state::ready && !n.taken(1);
    unsigned m = 0;
    if (device_ready)
      m |= n.device_children == 0 ? tree_node::counted_device | tree_node::in_device_set
                                  : tree_node::counted_device;
    if (host_ready && device == copy_state::absent)
      m |= n.children == 0 ? tree_node::counted_host | tree_node::in_host_set
                           : tree_node::counted_host;
    if (device_ready && host_ready)
      m |= tree_node::in_copy_set;
    return m;
  }
  /// Calls f(child) for each child of `id`.
  template <class F>
  void for_each_child(node_id id, F f) const {
    for (node_id c = nodes_[id].first_child; c != root_node; c = nodes_[c].next_sibling)
      f(c);
  }
  /// Live node ids in ascending order (for checkers and reports).
  std::vector<node_id> live_nodes() const;
  /// Number of node slots, live or not (ids are below this).
  uint32_t slot_count() const { return static_cast<uint32_t>(nodes_.size()); }
  /// Number of hashes the lookup map holds.
  size_t indexed() const { return by_hash_.size(); }
  /// Members of tier `t`'s evictable set that have an entry in its queue (every member must;
  /// one that left the set and came back with the same key may have two).
  uint32_t live_entries(tier t) const;
  /// The member that eviction would take next from tier `t`, or root_node if the set is empty.
  node_id peek_victim(tier t) const;
  /// Members of the copy set (T6): host copies of idle device blocks.
  uint32_t copies() const { return copies_count_; }
  /// The member the copy set would give up next, or root_node if it is empty.
  node_id peek_copy() const;
  /// Calls f(id) for each copy-set entry that stands for a member (at least one per member; a
  /// node that left the set and came back with the same key may have two, which pop and
  /// compaction tolerate). Until the set is first asked for a copy it keeps no entries, and
  /// its members stand for themselves.
  template <class F>
  void for_each_copy_entry(F f) const {
    if (!copies_queued_) {
      for (node_id id = 1; id < nodes_.size(); ++id)
        if (nodes_[id].in_copies())
          f(id);
      return;
    }
    copies_.for_each([&](const evictable_queue::entry& e) {
      if (current_copy(e))
        f(static_cast<node_id>(e.id));
    });
  }

  // -- structure ------------------------------------------------------------------------------

  /// Adds a node for `hash` under `parent`, with no copies and no refs. The hash must be new.
  node_id add(node_id parent, block_hash hash, uint32_t tokens);
  /// The node of `hash`, added under `parent` if the tree has none (one hash probe either way).
  /// `added` tells which.
  node_id find_or_add(node_id parent, block_hash hash, uint32_t tokens, bool& added);
  /// Removes a node that has no children, no copies and no refs.
  void remove(node_id id);

  // -- copies and refs ------------------------------------------------------------------------

  /// Sets the copy state of tier `t` (and its block while not absent).
  void set_copy(node_id id, tier t, copy_state st, block_id block = 0);
  /// Holds a node for a request; `hit` counts a reuse (a prefix match).
  void acquire(node_id id, bool hit);
  /// Drops a hold; at ref 0 the node takes the next release order.
  void release(node_id id);
  /// Gives the node a fresh release order (it just moved to the host tier).
  void renew_order(node_id id);
  /// Records that a store of the node's block was issued (tree_node::stored).
  void mark_stored(node_id id) { nodes_[id].set_stored(true); }

  // -- eviction -------------------------------------------------------------------------------

  /// Chooses `n` nodes to evict from tier `t`, leaves first in key order, counting each chosen
  /// node as gone so its parent may follow. All or nothing: on shortage the tree is unchanged
  /// and false is returned. Each chosen node must then lose its copy in `t` (set_copy absent).
  bool take_evictable(tier t, uint32_t n, std::vector<node_id>& out);
  /// Chooses node `id`, a member of tier `t`'s evictable set, as take_evictable would; false
  /// (nothing changed) if it is not one. It must then lose its copy in `t`.
  bool take_member(node_id id, tier t);
  /// Takes the copy set's first member out of it and returns it (root_node if it is empty);
  /// the caller must then drop its host copy.
  node_id take_copy();

  /// Empties the tree (a set sink hears cleared()).
  void reset();

  /// Reports each copy that turns ready or stops being ready, and each reset, to `sink` (null:
  /// nobody; the default). The sink must outlive the tree or be unset first.
  void set_event_sink(block_event_sink* sink) { sink_ = sink; }

 private:
  friend struct radix_tree_tamper;  // tests: corrupts the tree to show the checker fires
  // Brings node `id`'s membership bits, the sets and the counts in line with its state (called
  // after every change of it; most change nothing there).
  void update(node_id id) {
    if (id == root_node)
      return;
    const tree_node& n = nodes_[id];
    const unsigned want = derived_membership(n), diff = want ^ n.membership();
    if (diff != 0)
      apply_membership(id, want, diff);
  }
  void apply_membership(node_id id, unsigned want, unsigned diff);
  // Whether evicting n from tier t may take it out of the index (its hash is worth loading
  // ahead): a host victim goes; a device victim with a host copy stays.
  static bool leaves_index(const tree_node& n, int t) {
    return t == node_tier(tier::host) || !n.has(tier::host);
  }
  // The rare paths stay out of line (noinline), so that the hot ones that call them need few
  // registers saved: at tens of millions of calls a replay, a call's prologue is a few percent.
  [[gnu::noinline]] void compact_copies();
  [[gnu::noinline]] void queue_copies();
  // A member's key cannot change while it is one: a hit and a release need a hold, which takes
  // it out, and renew_order() is for nodes without a device copy.
  evictable_queue::entry key_of(node_id id) const {
    const tree_node& n = nodes_[id];
    if (policy_ == eviction_policy::lru)
      return {n.release_order, 0, id};
    return {n.hit_count, n.release_order, id};
  }
  bool current_copy(const evictable_queue::entry& e) const;
  void push(node_id id, int t) {
    ++set_count_[t];
    queue_[t].push(key_of(id));
    if (queue_[t].size() > 2 * size_t{set_count_[t]} + 1024)
      compact(t);
  }
  bool pop(int t, node_id& out);
  [[gnu::noinline]] void compact(int t);
  // An entry stands for a member whose key it carries: a member's key cannot change while it
  // is one (key_of), and a node that leaves a set and comes back with the same key has two
  // entries, which pop and compaction tolerate.
  bool current(const evictable_queue::entry& e, int t) const {
    const tree_node& n = nodes_[e.id];
    return n.in_set(t) && same_key(e);
  }
  bool same_key(const evictable_queue::entry& e) const {
    evictable_queue::entry k = key_of(e.id);
    return k.k1 == e.k1 && k.k2 == e.k2;
  }
  void untake(node_id id, int t);
  [[gnu::noinline]] void report_copy(node_id id, tier t, bool was_ready, bool is_ready);

  eviction_policy policy_;
  std::vector<tree_node, huge_page_allocator<tree_node>> nodes_;
  std::vector<node_id> free_slots_;
  absl::flat_hash_map<block_hash, node_id, absl::Hash<block_hash>, std::equal_to<block_hash>,
                      huge_page_allocator<std::pair<const block_hash, node_id>>>
    by_hash_;
  evictable_queue queue_[node_tier_count];
  // T6. Its queue is built when the host tier first gives up a copy: a host tier with room for
  // its host-only blocks never does, and would pay for every block's entry for nothing (a
  // push on each release, a sweep as they go stale). The members are kept counted and marked
  // all along; the order they pop in is the same either way (keys).
  evictable_queue copies_;
  bool copies_queued_ = false;
  uint32_t copies_count_ = 0;
  std::vector<uint8_t> seen_;  // scratch: compaction
  uint32_t set_count_[node_tier_count] = {0, 0};
  uint32_t reclaimable_[node_tier_count] = {0, 0};
  uint32_t live_count_ = 0;
  uint64_t next_order_ = 1;
  block_event_sink* sink_ = nullptr;
};

}  // namespace kvtier
