#include "serve/published_blocks.hpp"

namespace kvtier::serve {

void published_blocks::stored(tier where, block_hash hash, std::optional<block_hash> parent,
                              uint32_t tokens) {
  if (where == tier::device || where == tier::host) {
    shard& s = shard_of(hash);
    std::lock_guard<std::mutex> guard(s.mutex);
    copies& c = s.blocks[hash];
    c.tokens = tokens;
    (where == tier::device ? c.device : c.host) = true;
  }
  if (next_)
    next_->stored(where, hash, parent, tokens);
}

void published_blocks::removed(tier where, block_hash hash) {
  if (where == tier::device || where == tier::host) {
    shard& s = shard_of(hash);
    std::lock_guard<std::mutex> guard(s.mutex);
    if (auto it = s.blocks.find(hash); it != s.blocks.end()) {
      (where == tier::device ? it->second.device : it->second.host) = false;
      if (!it->second.device && !it->second.host)
        s.blocks.erase(it);
    }
  }
  if (next_)
    next_->removed(where, hash);
}

void published_blocks::cleared() {
  for (shard& s : shards_) {
    std::lock_guard<std::mutex> guard(s.mutex);
    s.blocks.clear();
  }
  if (next_)
    next_->cleared();
}

void published_blocks::batch_end() {
  if (next_)
    next_->batch_end();
}

prefix_hit published_blocks::match(const cache_block* blocks, size_t n) const {
  prefix_hit h;
  bool device_run = true;
  for (size_t i = 0; i < n; ++i) {
    copies c;
    {
      const shard& s = shard_of(blocks[i].hash);
      std::lock_guard<std::mutex> guard(s.mutex);
      auto it = s.blocks.find(blocks[i].hash);
      if (it == s.blocks.end())
        break;
      c = it->second;
    }
    if (device_run && c.device) {
      ++h.device_blocks;
      h.device_tokens += c.tokens;
    } else if (!c.device && c.host) {
      device_run = false;
      ++h.host_blocks;
      h.host_tokens += c.tokens;
    } else {
      break;
    }
  }
  return h;
}

}  // namespace kvtier::serve
