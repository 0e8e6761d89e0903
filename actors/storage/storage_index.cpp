#include "actors/storage/storage_index.hpp"

#include <xxhash.h>

#include "actors/check.hpp"

namespace kvtier {

storage_key make_storage_key(uint64_t name_space, uint64_t block_hash) {
  const uint64_t words[2] = {name_space, block_hash};
  return XXH3_64bits(words, sizeof(words));
}

storage_index::storage_index(uint64_t capacity, uint32_t nodes) : capacity_(capacity) {
  KVTIER_ASSERT(nodes > 0);
  nodes_.resize(nodes);
  for (uint32_t i = 0; i < nodes; ++i)
    nodes_[i].capacity = capacity / nodes + (i < capacity % nodes ? 1 : 0);
  entries_.emplace_back();  // slot 0 means "none"
}

uint32_t storage_index::node_of(storage_key key) const {
  return static_cast<uint32_t>((key >> 32) % nodes_.size());
}

bool storage_index::contains(storage_key key) const {
  return map_.contains(key);
}

size_t storage_index::leading_run(const storage_key* keys, size_t n) const {
  size_t i = 0;
  while (i < n && contains(keys[i]))
    ++i;
  return i;
}

void storage_index::link_tail(uint32_t slot) {
  entry& e = entries_[slot];
  node_state& n = nodes_[e.node];
  e.prev = n.tail;
  e.next = 0;
  if (n.tail)
    entries_[n.tail].next = slot;
  else
    n.head = slot;
  n.tail = slot;
}

void storage_index::unlink(uint32_t slot) {
  entry& e = entries_[slot];
  node_state& n = nodes_[e.node];
  if (e.prev)
    entries_[e.prev].next = e.next;
  else
    n.head = e.next;
  if (e.next)
    entries_[e.next].prev = e.prev;
  else
    n.tail = e.prev;
  e.prev = e.next = 0;
}

bool storage_index::touch(storage_key key) {
  auto it = map_.find(key);
  if (it == map_.end())
    return false;
  unlink(it->second);
  link_tail(it->second);
  return true;
}

bool storage_index::evict_one(node_state& n) {
  for (uint32_t slot = n.head; slot != 0; slot = entries_[slot].next) {
    if (entries_[slot].leases > 0)
      continue;
    unlink(slot);
    map_.erase(entries_[slot].key);
    free_slots_.push_back(slot);
    --n.size;
    ++evictions_;
    return true;
  }
  return false;
}

bool storage_index::put(storage_key key) {
  if (touch(key))
    return true;
  uint32_t node = node_of(key);
  node_state& n = nodes_[node];
  if (n.capacity == 0)
    return false;
  if (n.size >= n.capacity && !evict_one(n))
    return false;
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    slot = static_cast<uint32_t>(entries_.size());
    entries_.emplace_back();
  }
  entries_[slot] = entry{key, 0, 0, 0, node};
  link_tail(slot);
  map_.emplace(key, slot);
  ++n.size;
  return true;
}

bool storage_index::lease(storage_key key) {
  auto it = map_.find(key);
  if (it == map_.end())
    return false;
  ++entries_[it->second].leases;
  touch(key);
  return true;
}

void storage_index::release_lease(storage_key key) {
  auto it = map_.find(key);
  KVTIER_ASSERT(it != map_.end() && entries_[it->second].leases > 0);
  --entries_[it->second].leases;
}

}  // namespace kvtier
