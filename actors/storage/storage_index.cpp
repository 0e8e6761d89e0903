#include "actors/storage/storage_index.hpp"

#include <algorithm>

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

void storage_index::mark_used(uint32_t slot) {
  entry& e = entries_[slot];
  e.stamp = next_stamp_++;
  node_state& n = nodes_[e.node];
  n.uses.push_back({e.stamp, slot});
  if (n.uses.size() - n.head > 2 * n.size + 1024)
    sweep(n);
}

void storage_index::sweep(node_state& n) {
  auto stale = [&](const use& u) { return entries_[u.slot].stamp != u.stamp; };
  n.uses.erase(n.uses.begin(), n.uses.begin() + static_cast<long>(n.head));
  n.uses.erase(std::remove_if(n.uses.begin(), n.uses.end(), stale), n.uses.end());
  n.head = 0;
}

bool storage_index::touch(storage_key key) {
  auto it = map_.find(key);
  if (it == map_.end())
    return false;
  mark_used(it->second);
  return true;
}

bool storage_index::evict_one(node_state& n) {
  // Leased blocks met at the front are passed over as just used; after one lap of the node's
  // blocks without a victim, everything is leased.
  for (uint64_t passed = 0; n.head < n.uses.size() && passed <= n.size;) {
    use u = n.uses[n.head++];
    entry& e = entries_[u.slot];
    if (e.stamp != u.stamp)
      continue;  // stale: used again later
    if (e.leases > 0) {
      mark_used(u.slot);
      ++passed;
      continue;
    }
    map_.erase(e.key);
    e.stamp = 0;
    free_slots_.push_back(u.slot);
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
  entries_[slot] = entry{key, 0, 0, node};
  map_.emplace(key, slot);
  ++n.size;
  mark_used(slot);
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
