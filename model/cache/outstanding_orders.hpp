#pragma once

// The cache model's orders handed out and not yet completed. Ids are issued in increasing order
// and mostly complete in that order, so they sit in a window from the oldest outstanding id to
// the newest: add, take and lookup are index arithmetic, not hashing (the hit-rate replay
// completes millions of orders). The window is a ring over one array that only grows: a step
// issues and completes hundreds of orders, and a window of heap chunks (std::deque) allocated
// and freed one every few orders.

#include <cstdint>
#include <vector>

#include "core/check.hpp"

namespace kvtier {

template <class Order>
class outstanding_orders {
 public:
  /// `o.id` must be larger than every id added before.
  void add(const Order& o) {
    if (size_ == 0) {
      base_ = o.id;
      head_ = 0;
    }
    KVTIER_ASSERT(o.id >= base_ + size_);
    while (base_ + size_ < o.id)
      push_back(Order{});  // ids never added here (0: an empty slot)
    push_back(o);
    ++count_;
  }
  /// Removes and returns the order `id`, which must be outstanding.
  Order take(uint64_t id) {
    const uint64_t i = id - base_;  // an id below base_ wraps past size_
    KVTIER_ASSERT(i < size_);
    Order& slot = at(i);
    KVTIER_ASSERT(slot.id == id);
    Order o = slot;
    slot.id = 0;
    --count_;
    // The window's oldest slot is always outstanding, so only taking it moves the window: past
    // it and every done slot after it.
    if (i == 0) {
      do {
        head_ = (head_ + 1) & mask_;
        --size_;
        ++base_;
      } while (size_ > 0 && ring_[head_].id == 0);
    }
    return o;
  }
  bool empty() const { return count_ == 0; }
  size_t size() const { return count_; }
  template <class F>
  void for_each(F f) const {
    for (size_t i = 0; i < size_; ++i)
      if (const Order& o = ring_[(head_ + i) & mask_]; o.id != 0)
        f(o);
  }

 private:
  Order& at(size_t i) { return ring_[(head_ + i) & mask_]; }
  void push_back(const Order& o) {
    if (size_ == ring_.size())
      grow();
    at(size_++) = o;
  }
  // Doubles the ring (a power of two, so an index wraps with a mask), its window unrolled to
  // the front.
  void grow() {
    std::vector<Order> bigger(ring_.empty() ? 64 : 2 * ring_.size());
    for (size_t i = 0; i < size_; ++i)
      bigger[i] = at(i);
    ring_.swap(bigger);
    mask_ = ring_.size() - 1;
    head_ = 0;
  }

  std::vector<Order> ring_;  // ring_[(head_ + i) & mask_] holds id base_ + i, or id 0 once taken
  size_t mask_ = 0;          // ring_.size() - 1
  size_t head_ = 0;
  size_t size_ = 0;  // slots in the window
  uint64_t base_ = 0;
  size_t count_ = 0;
};

}  // namespace kvtier
