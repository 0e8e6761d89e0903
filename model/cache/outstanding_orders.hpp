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
    KVTIER_ASSERT(id >= base_ && id - base_ < size_ && at(id - base_).id == id);
    Order o = at(id - base_);
    at(id - base_).id = 0;
    --count_;
    while (size_ > 0 && at(0).id == 0) {  // the oldest slots that are done leave the window
      head_ = (head_ + 1) & (ring_.size() - 1);
      --size_;
      ++base_;
    }
    return o;
  }
  bool empty() const { return count_ == 0; }
  size_t size() const { return count_; }
  template <class F>
  void for_each(F f) const {
    for (size_t i = 0; i < size_; ++i)
      if (const Order& o = ring_[(head_ + i) & (ring_.size() - 1)]; o.id != 0)
        f(o);
  }

 private:
  Order& at(size_t i) { return ring_[(head_ + i) & (ring_.size() - 1)]; }
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
    head_ = 0;
  }

  std::vector<Order> ring_;  // ring_[(head_ + i) & mask] holds id base_ + i, or id 0 once taken
  size_t head_ = 0;
  size_t size_ = 0;  // slots in the window
  uint64_t base_ = 0;
  size_t count_ = 0;
};

}  // namespace kvtier
