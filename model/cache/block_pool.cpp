#include "model/cache/block_pool.hpp"

#include <algorithm>

#include "core/check.hpp"

namespace kvtier {

block_pool::block_pool(uint32_t capacity) : capacity_(capacity) {
  // Room for the states up front (address space only: a page is mapped when first used), so a
  // live controller's first seconds do not regrow and copy the array under a step. A huge
  // capacity still grows as blocks are first handed out.
  constexpr uint32_t reserve_limit = uint32_t{1} << 21;
  slots_.reserve(std::min(capacity, reserve_limit));
}

block_pool::state block_pool::block_state(block_id id) const {
  KVTIER_ASSERT(id < capacity_);
  return id < slots_.size() ? slots_[id].st : state::free;
}

uint32_t block_pool::pins(block_id id) const {
  KVTIER_ASSERT(id < capacity_);
  return id < slots_.size() ? slots_[id].pins : 0;
}

bool block_pool::allocate(uint32_t n, std::vector<block_id>& out, bool reuse_retired) {
  uint32_t available = free_count() + (reuse_retired ? retired_ : 0);
  if (n > available)
    return false;
  for (uint32_t i = 0; i < n; ++i) {
    block_id id;
    if (!free_.empty()) {
      id = free_.back();
      free_.pop_back();
    } else if (next_fresh_ < capacity_) {
      id = next_fresh_++;
      slots_.emplace_back();
    } else {
      // Oldest retirement first: its transfer is the likeliest to be done.
      KVTIER_ASSERT(reuse_retired && !retired_list_.empty());
      id = retired_list_.front();
      retired_list_.erase(retired_list_.begin());
      KVTIER_ASSERT(slots_[id].st == state::retired);
      --retired_;
      slots_[id].st = state::free;
    }
    slot& s = slots_[id];
    KVTIER_ASSERT(s.st == state::free);
    s.st = state::used;
    ++used_;
    out.push_back(id);
  }
  return true;
}

void block_pool::release(block_id id) {
  slot& s = touched(id);
  KVTIER_ASSERT(s.st == state::used);
  --used_;
  if (s.pins > 0) {
    s.st = state::retired;
    ++retired_;
    retired_list_.push_back(id);
  } else {
    s.st = state::free;
    free_.push_back(id);
  }
}

void block_pool::free_retired(block_id id) {
  slot& s = slots_[id];
  auto it = std::find(retired_list_.begin(), retired_list_.end(), id);
  KVTIER_ASSERT(it != retired_list_.end());
  retired_list_.erase(it);
  --retired_;
  s.st = state::free;
  free_.push_back(id);
}

void block_pool::reset() {
  for (const slot& s : slots_)
    KVTIER_ASSERT(s.pins == 0);
  used_ = retired_ = 0;
  next_fresh_ = 0;
  free_.clear();
  retired_list_.clear();
  slots_.clear();
}

}  // namespace kvtier
