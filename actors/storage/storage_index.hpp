#pragma once

// The content of the storage tier (L3): which block keys each storage node holds, with a capacity
// in blocks and LRU eviction per node. Keys are content addresses: a block hash mixed with the
// model/dtype namespace (storage_key), so one pool can serve several models without collisions.
// Blocks spread over nodes by key.
//
// An existence probe does not count as a use (it must not keep a block alive: a known way for
// shared stores to end up with nothing evictable); a get and a put do. A block that a get is
// still reading is leased and not evicted until the lease ends.

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

  /// Whether the key is stored (no LRU effect).
  bool contains(storage_key key) const;
  /// Number of leading keys of `keys` that are stored.
  size_t leading_run(const storage_key* keys, size_t n) const;
  /// Marks a stored key as used now; false if absent.
  bool touch(storage_key key);
  /// Stores a key (or touches it if present), evicting the node's least recently used unleased
  /// key when the node is full. Returns false if the node is full of leased keys.
  bool put(storage_key key);
  /// A get starts reading the key: it is used now and cannot be evicted until release_lease().
  bool lease(storage_key key);
  void release_lease(storage_key key);

 private:
  struct entry {
    storage_key key = 0;
    uint32_t prev = 0, next = 0;  // LRU list of the node, 0 = none (slot 0 is unused)
    uint32_t leases = 0;
    uint32_t node = 0;
  };
  struct node_state {
    uint64_t capacity = 0;
    uint64_t size = 0;
    uint32_t head = 0, tail = 0;  // head = least recently used
  };
  void link_tail(uint32_t slot);
  void unlink(uint32_t slot);
  bool evict_one(node_state& n);

  uint64_t capacity_;
  std::vector<node_state> nodes_;
  std::vector<entry> entries_;
  std::vector<uint32_t> free_slots_;
  absl::flat_hash_map<storage_key, uint32_t> map_;
  uint64_t evictions_ = 0;
};

}  // namespace kvtier
