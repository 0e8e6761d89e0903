#pragma once

// The content of the storage tier (L3): which block keys each storage node holds, with a capacity
// in blocks and LRU eviction per node. Keys are content addresses: a block hash mixed with the
// model/dtype namespace (storage_key), so one pool can serve several models without collisions.
// Blocks spread over nodes by key.
//
// An existence probe does not count as a use (it must not keep a block alive: a known way for
// shared stores to end up with nothing evictable); a get and a put do. A block that a get is
// still reading is leased and not evicted until the lease ends: eviction passes over it and
// counts it as just used.
//
// LRU order per node is a queue of (use stamp, key) entries, appended on every use; an entry
// whose stamp is no longer its block's latest (or whose block is gone) is stale and skipped when
// it reaches the front (and swept out when stale entries pile up). A use is thus one append, not
// a relinking. The index is memory-bound (a put that evicts touches two random places, the key's
// slot and the victim's), so the map holds only each key's latest use; the few leased keys are
// counted apart.
//
// Pool semantics (Mooncake Store's, docs/faults.md, "Pool semantics"):
//  - leases: a key that `exists` matched is not evicted for `lease_ns` (lease_for), so a prefetch
//    that follows its probe finds what the probe promised; a get holds its own lease (lease())
//    until it is released;
//  - two-phase put: begin_put() registers a write in flight, end_put() makes the key visible;
//    until then exists and get do not see it (no dirty reads), and a second put of a key present
//    or in flight is not written again;
//  - eviction: `lru` evicts one least recently used unleased key when a node is full; `watermark`
//    evicts `evict_fraction` of the node's capacity at once, in LRU order over unleased keys,
//    when a put finds the node full or leaves it above `high_watermark`;
//  - a node can be lost (drop_node: every key on it is gone) and refuses writes until it is back.

#include <cstdint>
#include <string>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "core/huge_page_allocator.hpp"

namespace kvtier {

using storage_key = uint64_t;

enum class storage_eviction : uint8_t { lru, watermark };

/// When a block starts to count against its node's capacity: once it is `stored` (the modelled
/// pool, whose writes hold nothing), or once its put is `accepted` (begin_put), so that a pool
/// whose bytes are real never holds more than its capacity while writes are in flight.
enum class storage_capacity_count : uint8_t { stored, accepted };

const char* to_string(storage_eviction e);

/// How a node makes room and how long `exists` protects what it matched.
struct storage_pool_policy {
  storage_eviction eviction = storage_eviction::lru;
  double high_watermark = 0.9;  ///< watermark: evict once a node is fuller than this share
  double evict_fraction = 0.05; ///< watermark: share of a node's capacity evicted at once
  int64_t lease_ns = 0;         ///< how long a key matched by exists is not evicted; 0 = never
  storage_capacity_count count_from = storage_capacity_count::stored;
};

/// What begin_put found for a key.
/// `no_room`: counting from `accepted`, the node is full of blocks being written or read.
enum class put_start : uint8_t { write, present, in_flight, node_down, no_room };

/// The key of a block hash in the namespace of one model and KV dtype.
storage_key make_storage_key(uint64_t name_space, uint64_t block_hash);

class storage_index {
 public:
  /// `capacity` blocks in all, spread over `nodes` nodes.
  storage_index(uint64_t capacity, uint32_t nodes = 1, storage_pool_policy policy = {});

  uint64_t capacity() const { return capacity_; }
  uint32_t nodes() const { return static_cast<uint32_t>(nodes_.size()); }
  uint64_t size() const { return map_.size(); }
  /// Makes room for `blocks` keys up front (at most the capacity), so that a replay timed from
  /// its first request does not rehash the index as it fills. Changes no result.
  void reserve(uint64_t blocks);
  uint32_t node_of(storage_key key) const;
  uint64_t evictions() const { return evictions_; }

  /// Starts loading what an operation on `key` will touch (the index is memory-bound: callers
  /// with a batch of keys prefetch them ahead).
  void prefetch(storage_key key) const { map_.prefetch(key); }
  /// Whether the key is stored (no LRU effect).
  bool contains(storage_key key) const;
  /// Number of leading keys of `keys` that are stored.
  size_t leading_run(const storage_key* keys, size_t n) const;
  /// Marks a stored key as used now; false if absent.
  bool touch(storage_key key);
  /// Stores a key (or touches it if present), evicting the node's least recently used unleased
  /// key when the node is full (appended to `evicted` when given: a backend deletes its bytes).
  /// Returns false if the node is full of leased keys.
  bool put(storage_key key, std::vector<storage_key>* evicted = nullptr);
  /// Forgets a key that is no longer stored (its backend lost it); false if absent or leased.
  bool erase(storage_key key);
  /// A get starts reading the key: it is used now and cannot be evicted until release_lease().
  /// False if the key is not stored (written completely).
  bool lease(storage_key key);
  void release_lease(storage_key key);

  // -- pool semantics ----------------------------------------------------------------------------
  /// The pool's present time (leases that exists granted end by it).
  void set_now(int64_t now_ns) { now_ns_ = now_ns; }
  int64_t now() const { return now_ns_; }
  const storage_pool_policy& policy() const { return policy_; }
  /// An exists matched the key: it is not evicted until `policy().lease_ns` from now.
  void lease_for(storage_key key);
  /// Whether an exists lease protects the key now.
  bool lease_active(storage_key key) const;
  /// First phase of a put: `write` registers the key as in flight (invisible until end_put);
  /// `present` touches the stored key; `in_flight` and `node_down` leave everything as it is.
  /// Counting from `accepted`, `write` first makes room for the key (LRU victims appended to
  /// `evicted`), and the key counts against the node's capacity from now.
  put_start begin_put(storage_key key, std::vector<storage_key>* evicted = nullptr);
  /// Second phase: the write in flight ends. `ok`: the key becomes visible (as put()); false:
  /// nothing is left behind. Returns whether the key is stored now.
  bool end_put(storage_key key, bool ok, std::vector<storage_key>* evicted = nullptr);
  bool writing(storage_key key) const { return writing_.contains(key); }
  uint64_t writes_in_flight() const { return writing_.size(); }
  /// Loses every key on `node` (appended to `lost`); the node refuses writes until node_up().
  void drop_node(uint32_t node, std::vector<storage_key>* lost = nullptr);
  void node_up(uint32_t node) { nodes_[node].down = false; }
  bool node_down(uint32_t node) const { return nodes_[node].down; }
  uint64_t leased_keys() const { return leases_.size(); }
  /// Evictions passed over a key because a lease (get or exists) protected it.
  uint64_t lease_deferrals() const { return lease_deferrals_; }
  /// Watermark evictions: batches run.
  uint64_t eviction_batches() const { return eviction_batches_; }
  /// Reads asked of a key whose write had not completed (refused; must stay 0).
  uint64_t unwritten_reads() const { return unwritten_reads_; }

  /// Checks the index's structure: per-node sizes, capacity, leases only on stored keys, no key
  /// both visible and in flight, nothing stored on a down node, no unwritten read. Appends what
  /// is wrong to `problems`; returns the number of conditions checked.
  uint64_t check(std::vector<std::string>& problems) const;

 private:
  friend struct storage_index_tamper;  // tests: corrupts the index to show check() fires
  struct use {
    uint64_t stamp;
    storage_key key;
  };
  struct node_state {
    uint64_t capacity = 0;
    uint64_t size = 0;
    uint64_t writing = 0;  // puts in flight that count against capacity (`accepted`)
    std::vector<use, huge_page_allocator<use>> uses;  // in stamp order from `head`: the least recently used first
    size_t head = 0;
    bool down = false;
  };
  void mark_used(storage_key key, uint64_t& stamp);
  bool evict_one(node_state& n, std::vector<storage_key>* evicted);
  bool make_room(node_state& n, std::vector<storage_key>* evicted);
  void sweep(node_state& n);
  bool protected_now(storage_key key);

  uint64_t capacity_;
  storage_pool_policy policy_;
  std::vector<node_state> nodes_;
  // key -> stamp of its latest use
  absl::flat_hash_map<storage_key, uint64_t, absl::Hash<storage_key>, std::equal_to<storage_key>,
                      huge_page_allocator<std::pair<const storage_key, uint64_t>>>
    map_;
  absl::flat_hash_map<storage_key, uint32_t> leases_;  // keys being read -> readers
  absl::flat_hash_map<storage_key, int64_t> exists_leases_;  // key -> end of its lease
  absl::flat_hash_map<storage_key, uint32_t> writing_;       // puts in flight -> 1
  uint64_t evictions_ = 0;
  uint64_t next_stamp_ = 1;
  int64_t now_ns_ = 0;
  uint64_t lease_deferrals_ = 0, eviction_batches_ = 0, unwritten_reads_ = 0;
};

}  // namespace kvtier
