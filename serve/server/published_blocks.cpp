#include "serve/server/published_blocks.hpp"

namespace kvtier::serve {

void published_blocks::record(change what, block_hash hash, uint32_t tokens) {
  batch_.push_back({what, tokens, hash});
}

void published_blocks::stored(tier where, block_hash hash, std::optional<block_hash> parent,
                              uint32_t tokens) {
  if (where != tier::storage)
    record(where == tier::device ? change::device_on : change::host_on, hash, tokens);
  if (next_)
    next_->stored(where, hash, parent, tokens);
}

void published_blocks::removed(tier where, block_hash hash) {
  if (where != tier::storage)
    record(where == tier::device ? change::device_off : change::host_off, hash, 0);
  if (next_)
    next_->removed(where, hash);
}

void published_blocks::cleared() {
  batch_.clear();  // what this batch reported before is gone too
  record(change::clear, 0, 0);
  if (next_)
    next_->cleared();
}

void published_blocks::batch_end() {
  if (!batch_.empty()) {
    std::lock_guard<std::mutex> guard(mutex_);
    if (handed_.empty())
      handed_.swap(batch_);
    else
      handed_.insert(handed_.end(), batch_.begin(), batch_.end());
  }
  batch_.clear();
  if (next_)
    next_->batch_end();
}

void published_blocks::catch_up() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    applying_.swap(handed_);
  }
  for (const report& r : applying_) {
    if (r.what == change::clear) {
      blocks_.clear();
      continue;
    }
    bool on = r.what == change::device_on || r.what == change::host_on;
    bool device = r.what == change::device_on || r.what == change::device_off;
    if (on) {
      copies& c = blocks_[r.hash];
      c.tokens = r.tokens;
      (device ? c.device : c.host) = true;
      continue;
    }
    auto it = blocks_.find(r.hash);
    if (it == blocks_.end())
      continue;
    (device ? it->second.device : it->second.host) = false;
    if (!it->second.device && !it->second.host)
      blocks_.erase(it);
  }
  applying_.clear();
}

prefix_hit published_blocks::match(const cache_block* blocks, size_t n) {
  catch_up();
  prefix_hit h;
  bool device_run = true;
  for (size_t i = 0; i < n; ++i) {
    auto it = blocks_.find(blocks[i].hash);
    if (it == blocks_.end())
      break;
    const copies& c = it->second;
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
