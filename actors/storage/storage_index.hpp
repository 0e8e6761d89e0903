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

#include <cstdint>
#include <vector>

#include <absl/container/flat_hash_map.h>

namespace kvtier {

using storage_key = uint64_t;

/// The key of a block hash in the namespace of one model and KV dtype.
storage_key make_storage_key(uint64_t name_space, uint64_t block_hash);

class storage_index {
 public:
  /// `capacity` blocks in all, spread over `nodes` nodes.
  storage_index(uint64_t capacity, uint32_t nodes = 1);

  uint64_t capacity() const { return capacity_; }
  uint32_t nodes() const { return static_cast<uint32_t>(nodes_.size()); }
  uint64_t size() const { return map_.size(); }
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
  bool lease(storage_key key);
  void release_lease(storage_key key);

 private:
  struct use {
    uint64_t stamp;
    storage_key key;
  };
  struct node_state {
    uint64_t capacity = 0;
    uint64_t size = 0;
    std::vector<use> uses;  // in stamp order from `head`: the least recently used first
    size_t head = 0;
  };
  void mark_used(storage_key key, uint64_t& stamp);
  bool evict_one(node_state& n, std::vector<storage_key>* evicted);
  void sweep(node_state& n);

  uint64_t capacity_;
  std::vector<node_state> nodes_;
  absl::flat_hash_map<storage_key, uint64_t> map_;      // key -> stamp of its latest use
  absl::flat_hash_map<storage_key, uint32_t> leases_;  // keys being read -> readers
  uint64_t evictions_ = 0;
  uint64_t next_stamp_ = 1;
};

}  // namespace kvtier
