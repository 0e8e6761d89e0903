#include "actors/storage/storage_index.hpp"

#include <algorithm>

#include <xxhash.h>

#include "core/check.hpp"
#include "actors/storage/storage_backend.hpp"

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
}

uint32_t storage_index::node_of(storage_key key) const {
  return node_of_key(key, static_cast<uint32_t>(nodes_.size()));
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

void storage_index::mark_used(storage_key key, uint64_t& stamp) {
  stamp = next_stamp_++;
  node_state& n = nodes_[node_of(key)];
  n.uses.push_back({stamp, key});
  if (n.uses.size() - n.head > 2 * n.size + 1024)
    sweep(n);
}

void storage_index::sweep(node_state& n) {
  auto stale = [&](const use& u) {
    auto it = map_.find(u.key);
    return it == map_.end() || it->second != u.stamp;
  };
  n.uses.erase(n.uses.begin(), n.uses.begin() + static_cast<long>(n.head));
  n.uses.erase(std::remove_if(n.uses.begin(), n.uses.end(), stale), n.uses.end());
  n.head = 0;
}

bool storage_index::touch(storage_key key) {
  auto it = map_.find(key);
  if (it == map_.end())
    return false;
  mark_used(key, it->second);
  return true;
}

bool storage_index::evict_one(node_state& n, std::vector<storage_key>* evicted) {
  // Leased blocks met at the front are passed over as just used; after one lap of the node's
  // blocks without a victim, everything is leased.
  for (uint64_t passed = 0; n.head < n.uses.size() && passed <= n.size;) {
    use u = n.uses[n.head++];
    constexpr size_t ahead = 4;  // victims go in queue order: start loading the next ones
    if (n.head + ahead < n.uses.size())
      map_.prefetch(n.uses[n.head + ahead].key);
    auto it = map_.find(u.key);
    if (it == map_.end() || it->second != u.stamp)
      continue;  // stale: used again later, or gone
    if (!leases_.empty() && leases_.contains(u.key)) {
      mark_used(u.key, it->second);
      ++passed;
      continue;
    }
    map_.erase(it);
    --n.size;
    ++evictions_;
    if (evicted)
      evicted->push_back(u.key);
    return true;
  }
  return false;
}

bool storage_index::put(storage_key key, std::vector<storage_key>* evicted) {
  node_state& n = nodes_[node_of(key)];
  auto it = map_.find(key);
  if (it != map_.end()) {
    mark_used(key, it->second);
    return true;
  }
  if (n.capacity == 0)
    return false;
  if (n.size >= n.capacity && !evict_one(n, evicted))
    return false;
  uint64_t& stamp = map_.try_emplace(key, 0).first->second;
  ++n.size;
  mark_used(key, stamp);
  return true;
}

bool storage_index::erase(storage_key key) {
  auto it = map_.find(key);
  if (it == map_.end() || (!leases_.empty() && leases_.contains(key)))
    return false;
  map_.erase(it);  // its queue entries are stale now and are skipped
  --nodes_[node_of(key)].size;
  return true;
}

bool storage_index::lease(storage_key key) {
  auto it = map_.find(key);
  if (it == map_.end())
    return false;
  ++leases_[key];
  mark_used(key, it->second);
  return true;
}

void storage_index::release_lease(storage_key key) {
  auto it = leases_.find(key);
  KVTIER_ASSERT(it != leases_.end() && map_.contains(key));
  if (--it->second == 0)
    leases_.erase(it);
}

}  // namespace kvtier
