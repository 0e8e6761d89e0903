#include "serve/client/engine_block_allocator.hpp"

#include "core/check.hpp"

namespace kvtier::serve {

namespace {

// A block's key fixes its whole prefix: equal keys, equal prefixes (the trace's hash ids name
// a block's content at its position; the chain makes the key a prefix's).
uint64_t chain(uint64_t parent, uint64_t hash) {
  uint64_t x = parent * 0x9e3779b97f4a7c15ull ^ (hash + 0x632be59bd9b4e019ull);
  x ^= x >> 31;
  return x * 0xbf58476d1ce4e5b9ull;
}

const std::vector<uint32_t> no_blocks;

}  // namespace

engine_block_allocator::engine_block_allocator(uint32_t capacity, uint32_t block_size)
    : block_size_(block_size), blocks_(capacity) {
  free_.reserve(capacity);
  for (uint32_t id = capacity; id > 0; --id)
    free_.push_back(id - 1);
}

std::optional<uint32_t> engine_block_allocator::take_fresh() {
  if (!free_.empty()) {
    uint32_t id = free_.back();
    free_.pop_back();
    KVTIER_ASSERT(blocks_[id].refs == 0);  // a free block belongs to no request
    return id;
  }
  if (lru_.empty())
    return std::nullopt;
  uint32_t id = lru_.front();  // evict the least recently released cached block
  lru_.pop_front();
  KVTIER_ASSERT(blocks_[id].refs == 0 && blocks_[id].key);  // cached: released, named
  by_key_.erase(*blocks_[id].key);
  blocks_[id].key.reset();
  evicted_.push_back(id);
  return id;
}

void engine_block_allocator::drop_ref(uint32_t id) {
  block& b = blocks_[id];
  KVTIER_ASSERT(b.refs > 0);  // each table holding the block counts once
  if (--b.refs > 0)
    return;
  if (b.key) {
    b.cached = lru_.insert(lru_.end(), id);
    return;
  }
  free_.push_back(id);
  evicted_.push_back(id);
}

std::optional<std::vector<uint32_t>> engine_block_allocator::admit(
  request_id req, const std::vector<cache_block>& prompt, uint32_t tokens) {
  size_t want = (size_t{tokens} + block_size_ - 1) / block_size_;
  std::vector<uint32_t>& table = tables_[req];
  table.clear();
  uint64_t key = 0;
  size_t fresh = 0;
  bool shared = true;  // a prefix: once a block is not cached, none after it is looked up
  for (size_t i = 0; i < want; ++i) {
    // Every block the prompt names is cached, its partial last one too: kvtier's model of a
    // trace's blocks keeps it (docs/design.md), and the two caches must evict alike.
    bool named = i < prompt.size();
    if (named)
      key = chain(key, prompt[i].hash);
    if (named && shared)
      if (auto it = by_key_.find(key); it != by_key_.end()) {
        block& b = blocks_[it->second];
        if (b.refs++ == 0)
          lru_.erase(b.cached);
        table.push_back(it->second);
        continue;
      }
    shared = false;
    std::optional<uint32_t> id = take_fresh();
    if (!id) {
      undo_admit(req, i - fresh);
      return std::nullopt;
    }
    ++fresh;
    blocks_[*id].refs = 1;
    if (named && !by_key_.count(key)) {
      blocks_[*id].key = key;
      by_key_[key] = *id;
    }
    table.push_back(*id);
  }
  shared_[req] = want - fresh;
  return table;
}

void engine_block_allocator::refuse(request_id req) {
  auto it = shared_.find(req);
  if (it == shared_.end() || !tables_.count(req))
    return release(req);
  size_t shared = it->second;
  shared_.erase(it);
  undo_admit(req, shared);
}

void engine_block_allocator::undo_admit(request_id req, size_t shared) {
  std::vector<uint32_t>& table = tables_[req];
  for (size_t i = 0; i < table.size(); ++i) {
    if (i < shared) {
      drop_ref(table[i]);
      continue;
    }
    // Taken for this admission and never computed: free again, not cached.
    block& b = blocks_[table[i]];
    if (b.key)
      by_key_.erase(*b.key);
    b.key.reset();
    b.refs = 0;
    free_.push_back(table[i]);
  }
  tables_.erase(req);
}

std::optional<std::vector<uint32_t>> engine_block_allocator::grow(request_id req,
                                                                  uint32_t tokens) {
  std::vector<uint32_t>& table = tables_[req];
  size_t want = (size_t{tokens} + block_size_ - 1) / block_size_;
  std::vector<uint32_t> added;
  while (table.size() + added.size() < want) {
    std::optional<uint32_t> id = take_fresh();
    if (!id) {
      for (uint32_t a : added) {
        blocks_[a].refs = 0;
        free_.push_back(a);
      }
      return std::nullopt;
    }
    blocks_[*id].refs = 1;
    added.push_back(*id);
  }
  table.insert(table.end(), added.begin(), added.end());
  return added;
}

void engine_block_allocator::shrink(request_id req, size_t count) {
  auto it = tables_.find(req);
  if (it == tables_.end())
    return;
  for (; count > 0 && !it->second.empty(); --count) {
    drop_ref(it->second.back());
    it->second.pop_back();
  }
}

void engine_block_allocator::release(request_id req) {
  auto it = tables_.find(req);
  if (it == tables_.end())
    return;
  // Tail first, as vLLM's KV cache manager frees: a prefix outlives its tails in the cache.
  for (auto id = it->second.rbegin(); id != it->second.rend(); ++id)
    drop_ref(*id);
  tables_.erase(it);
  shared_.erase(req);
}

std::vector<uint32_t> engine_block_allocator::take_evicted() {
  std::vector<uint32_t> out;
  out.swap(evicted_);
  return out;
}

const std::vector<uint32_t>& engine_block_allocator::table(request_id req) const {
  auto it = tables_.find(req);
  return it == tables_.end() ? no_blocks : it->second;
}

}  // namespace kvtier::serve
