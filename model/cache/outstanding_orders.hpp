#pragma once

// The cache model's orders handed out and not yet completed. Ids are issued in increasing order
// and mostly complete in that order, so they sit in a window from the oldest outstanding id to
// the newest: add, take and lookup are index arithmetic, not hashing (the hit-rate replay
// completes millions of orders).

#include <cstdint>
#include <deque>

#include "core/check.hpp"

namespace kvtier {

template <class Order>
class outstanding_orders {
 public:
  /// `o.id` must be larger than every id added before.
  void add(const Order& o) {
    if (window_.empty())
      base_ = o.id;
    KVTIER_ASSERT(o.id >= base_ + window_.size());
    while (base_ + window_.size() < o.id)
      window_.emplace_back();  // ids never added here (0: an empty slot)
    window_.push_back(o);
    ++count_;
  }
  /// Removes and returns the order `id`, which must be outstanding.
  Order take(uint64_t id) {
    KVTIER_ASSERT(id >= base_ && id - base_ < window_.size() && window_[id - base_].id == id);
    Order o = window_[id - base_];
    window_[id - base_].id = 0;
    --count_;
    while (!window_.empty() && window_.front().id == 0) {
      window_.pop_front();
      ++base_;
    }
    return o;
  }
  bool empty() const { return count_ == 0; }
  size_t size() const { return count_; }
  template <class F>
  void for_each(F f) const {
    for (const Order& o : window_)
      if (o.id != 0)
        f(o);
  }

 private:
  std::deque<Order> window_;  // window_[i] holds id base_ + i, or id 0 once taken
  uint64_t base_ = 0;
  size_t count_ = 0;
};

}  // namespace kvtier
