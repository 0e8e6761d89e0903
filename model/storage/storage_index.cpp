#include "model/storage/storage_index.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#define XXH_INLINE_ALL  // a storage key hashes 16 bytes: inlined, as core/block_hash.cpp does
#include <xxhash.h>

#include "core/check.hpp"
#include "storage/storage_backend.hpp"

namespace kvtier {

storage_key make_storage_key(uint64_t name_space, uint64_t block_hash) {
  const uint64_t words[2] = {name_space, block_hash};
  return XXH3_64bits(words, sizeof(words));
}

const char* to_string(storage_eviction e) {
  return e == storage_eviction::lru ? "lru" : "watermark";
}

storage_index::storage_index(uint64_t capacity, uint32_t nodes, storage_pool_policy policy)
  : capacity_(capacity), policy_(policy) {
  KVTIER_ASSERT(nodes > 0);
  nodes_.resize(nodes);
  for (uint32_t i = 0; i < nodes; ++i)
    nodes_[i].capacity = capacity / nodes + (i < capacity % nodes ? 1 : 0);
}

void storage_index::reserve(uint64_t blocks) {
  blocks = std::min(blocks, capacity_);
  map_.reserve(blocks);
  for (node_state& n : nodes_)
    n.uses.reserve(3 * std::min(blocks, n.capacity) + 1024);  // sweep() at 2x, see mark_used
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
  // The queue's consumed front goes before the queue would grow: a grown queue is a fresh
  // mapping, every page of it faulted in again (BENCHMARKS.md, "The per-block path, second
  // pass"). reserve() leaves room for a third of it to be consumed.
  if (n.uses.size() == n.uses.capacity() && n.head * 4 >= n.uses.size()) {
    n.uses.erase(n.uses.begin(), n.uses.begin() + static_cast<long>(n.head));
    n.head = 0;
  }
  n.uses.push_back({stamp, key});
  if (n.uses.size() - n.head > 2 * n.size + 1024)
    sweep(n);
}

// Keeps the uses still current, in order. Each check probes the map at a random slot: the
// slots of the next few are prefetched, or the sweep waits for each miss in turn.
void storage_index::sweep(node_state& n) {
  constexpr size_t ahead = 8;
  size_t kept = 0, end = n.uses.size();
  for (size_t i = n.head; i < std::min(end, n.head + ahead); ++i)
    map_.prefetch(n.uses[i].key);
  for (size_t i = n.head; i < end; ++i) {
    if (i + ahead < end)
      map_.prefetch(n.uses[i + ahead].key);
    const use u = n.uses[i];
    auto it = map_.find(u.key);
    if (it != map_.end() && it->second == u.stamp)
      n.uses[kept++] = u;
  }
  n.uses.resize(kept);
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
    constexpr size_t ahead = 12;  // victims go in queue order: start loading the next ones
    if (n.head + ahead < n.uses.size())
      map_.prefetch(n.uses[n.head + ahead].key);
    auto it = map_.find(u.key);
    if (it == map_.end() || it->second != u.stamp)
      continue;  // stale: used again later, or gone
    if (protected_now(u.key)) {
      mark_used(u.key, it->second);
      ++passed;
      ++lease_deferrals_;
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

bool storage_index::protected_now(storage_key key) {
  if (!leases_.empty() && leases_.contains(key))
    return true;
  if (exists_leases_.empty())
    return false;
  auto it = exists_leases_.find(key);
  if (it == exists_leases_.end())
    return false;
  if (it->second > now_ns_)
    return true;
  exists_leases_.erase(it);  // expired
  return false;
}

// Frees a slot on a full node: one LRU victim, or under `watermark` a batch of
// evict_fraction x capacity (at least one), as Mooncake evicts when an allocation fails.
bool storage_index::make_room(node_state& n, std::vector<storage_key>* evicted) {
  if (n.size < n.capacity)
    return true;
  if (policy_.eviction == storage_eviction::lru)
    return evict_one(n, evicted);
  auto batch = std::max<uint64_t>(
    1, static_cast<uint64_t>(std::ceil(policy_.evict_fraction * static_cast<double>(n.capacity))));
  ++eviction_batches_;
  for (uint64_t i = 0; i < batch && evict_one(n, evicted); ++i) {
  }
  return n.size < n.capacity;
}

bool storage_index::put(storage_key key, std::vector<storage_key>* evicted) {
  node_state& n = nodes_[node_of(key)];
  auto it = map_.find(key);
  if (it != map_.end()) {
    mark_used(key, it->second);
    return true;
  }
  if (n.capacity == 0 || n.down)
    return false;
  if (!make_room(n, evicted))
    return false;
  uint64_t& stamp = map_.try_emplace(key, 0).first->second;
  ++n.size;
  mark_used(key, stamp);
  if (policy_.eviction == storage_eviction::watermark &&
      static_cast<double>(n.size) > policy_.high_watermark * static_cast<double>(n.capacity)) {
    // Above the high watermark: evict a batch now, in LRU order over unleased keys. The key just
    // stored is the node's newest; it goes only if everything older is leased.
    auto batch = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(
                                         policy_.evict_fraction * static_cast<double>(n.capacity))));
    ++eviction_batches_;
    for (uint64_t i = 0; i < batch && evict_one(n, evicted); ++i) {
    }
    return map_.contains(key);
  }
  return true;
}

void storage_index::lease_for(storage_key key) {
  if (policy_.lease_ns <= 0 || !map_.contains(key))
    return;
  int64_t until = now_ns_ + policy_.lease_ns;
  auto [it, fresh] = exists_leases_.try_emplace(key, until);
  if (!fresh)
    it->second = std::max(it->second, until);
}

bool storage_index::lease_active(storage_key key) const {
  auto it = exists_leases_.find(key);
  return it != exists_leases_.end() && it->second > now_ns_;
}

put_start storage_index::begin_put(storage_key key, std::vector<storage_key>* evicted) {
  if (touch(key))
    return put_start::present;
  if (writing_.contains(key))
    return put_start::in_flight;
  node_state& n = nodes_[node_of(key)];
  if (n.down)
    return put_start::node_down;
  if (policy_.count_from == storage_capacity_count::accepted) {
    while (n.size + n.writing >= n.capacity)
      if (!evict_one(n, evicted))
        return put_start::no_room;
    ++n.writing;
  }
  writing_.emplace(key, 1);
  return put_start::write;
}

bool storage_index::end_put(storage_key key, bool ok, std::vector<storage_key>* evicted) {
  auto it = writing_.find(key);
  KVTIER_ASSERT(it != writing_.end());
  writing_.erase(it);
  if (policy_.count_from == storage_capacity_count::accepted)
    --nodes_[node_of(key)].writing;
  return ok && put(key, evicted);
}

void storage_index::drop_node(uint32_t node, std::vector<storage_key>* lost) {
  node_state& n = nodes_[node];
  std::vector<storage_key> gone;
  for (const auto& [key, stamp] : map_)
    if (node_of(key) == node)
      gone.push_back(key);
  std::sort(gone.begin(), gone.end());  // hash-map order is not an order to report in
  for (storage_key k : gone) {
    map_.erase(k);
    leases_.erase(k);
    exists_leases_.erase(k);
  }
  n.size = 0;
  n.uses.clear();
  n.head = 0;
  n.down = true;
  if (lost)
    lost->insert(lost->end(), gone.begin(), gone.end());
}

uint64_t storage_index::check(std::vector<std::string>& problems) const {
  auto fail = [&](std::string what) { problems.push_back("storage index: " + what); };
  std::vector<uint64_t> counted(nodes_.size(), 0);
  for (const auto& [key, stamp] : map_)
    ++counted[node_of(key)];
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (counted[i] != nodes_[i].size)
      fail("node " + std::to_string(i) + " counts " + std::to_string(nodes_[i].size) +
           " blocks but holds " + std::to_string(counted[i]));
    if (counted[i] > nodes_[i].capacity)
      fail("node " + std::to_string(i) + " holds " + std::to_string(counted[i]) +
           " blocks, over its capacity " + std::to_string(nodes_[i].capacity));
    if (nodes_[i].down && counted[i] > 0)
      fail("node " + std::to_string(i) + " is down but holds " + std::to_string(counted[i]) +
           " blocks");
  }
  for (const auto& [key, readers] : leases_)
    if (!map_.contains(key))
      fail("a get lease on block " + std::to_string(key) + ", which is not stored");
  for (const auto& [key, until] : exists_leases_)
    if (!map_.contains(key))
      fail("an exists lease on block " + std::to_string(key) + ", which is not stored");
  std::vector<uint64_t> writing(nodes_.size(), 0);
  for (const auto& [key, one] : writing_) {
    ++writing[node_of(key)];
    if (map_.contains(key))
      fail("block " + std::to_string(key) + " is visible while its put is in flight");
  }
  for (size_t i = 0; policy_.count_from == storage_capacity_count::accepted &&
                     i < nodes_.size(); ++i)
    if (counted[i] + writing[i] > nodes_[i].capacity && writing[i] > 0)
      fail("node " + std::to_string(i) + " holds " + std::to_string(counted[i]) +
           " blocks and writes " + std::to_string(writing[i]) + ", over its capacity " +
           std::to_string(nodes_[i].capacity));
  if (unwritten_reads_ > 0)
    fail(std::to_string(unwritten_reads_) + " reads of blocks not completely written");
  return 7;
}

bool storage_index::erase(storage_key key) {
  auto it = map_.find(key);
  if (it == map_.end() || (!leases_.empty() && leases_.contains(key)))
    return false;
  map_.erase(it);
  exists_leases_.erase(key);  // its queue entries are stale now and are skipped
  --nodes_[node_of(key)].size;
  return true;
}

bool storage_index::lease(storage_key key) {
  auto it = map_.find(key);
  if (it == map_.end())
    return false;
  if (!writing_.empty() && writing_.contains(key)) {
    ++unwritten_reads_;  // a visible block being written: never served
    return false;
  }
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
