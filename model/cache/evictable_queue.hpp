#pragma once

// The members of one tier's evictable set, in eviction order (smallest key first).
//
// Deletion is lazy: when a node leaves the set its entry goes stale and is skipped when it
// reaches the front (the node's state tells), and stale entries are swept out when they pile
// up. Under LRU nearly every push carries the largest key so far (a node released now is the
// youngest), so pushes in key order go to a plain queue in O(1); the others (a parent that turns
// into a leaf when its last child is evicted, carrying its older key; every LFU key) go to a
// binary heap, except one that comes before every entry of a third list, a stack kept in
// descending key order: that is the parent of a node just evicted, which became a leaf carrying
// an older key than everything left (a request's path is released from its tail, so its blocks
// go leaf first, each parent next in line). A heap would sift each such key to its top and back
// down again: two walks of its height, through cold memory, per evicted block. The front of the
// set is the smallest of the three fronts.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/huge_page_allocator.hpp"

namespace kvtier {

class evictable_queue {
 public:
  struct entry {
    uint64_t k1 = 0;
    uint64_t k2 = 0;
    uint32_t id = 0;
  };

  static bool before(const entry& a, const entry& b) {
    return a.k1 != b.k1 ? a.k1 < b.k1 : a.k2 < b.k2;
  }

  void push(const entry& e) {
    if (head_ == fifo_.size() || !before(e, fifo_.back())) {
      fifo_.push_back(e);
      return;
    }
    push_out_of_order(e);
  }

  // Out of line: the in-order push above is the common one, and stays small enough to inline.
  [[gnu::noinline]] void push_out_of_order(const entry& e) {
    if (stack_.empty() || before(e, stack_.back())) {
      stack_.push_back(e);
      return;
    }
    heap_.push_back(e);
    std::push_heap(heap_.begin(), heap_.end(), after);
  }

  /// Whether `e` comes before every entry, stale or not: a member with that key would be the
  /// next one popped.
  bool before_all(const entry& e) const {
    return (head_ == fifo_.size() || before(e, fifo_[head_]))
           && (stack_.empty() || before(e, stack_.back()))
           && (heap_.empty() || before(e, heap_.front()));
  }

  /// Removes entries from the front until one passes `valid`, which it returns in `out`.
  template <class Valid>
  bool pop(Valid valid, entry& out) {
    return pop(valid, out, [](uint32_t, uint32_t) {});
  }

  /// Also calls `touch(far, near)` with the members some places behind the queue's front, for a
  /// caller that prefetches in two stages (a member, then what it points to): under LRU most
  /// victims come from there.
  template <class Valid, class Touch>
  bool pop(Valid valid, entry& out, Touch touch) {
    for (;;) {
      if (head_ + prefetch_far < fifo_.size())
        touch(fifo_[head_ + prefetch_far].id, fifo_[head_ + prefetch_near].id);
      enum { none, fifo, stack, heap } from = none;
      const entry* best = nullptr;
      if (head_ < fifo_.size()) {
        from = fifo;
        best = &fifo_[head_];
      }
      if (!stack_.empty() && (!best || before(stack_.back(), *best))) {
        from = stack;
        best = &stack_.back();
      }
      if (!heap_.empty() && (!best || before(heap_.front(), *best)))
        from = heap;
      if (from == none)
        return false;
      if (from == fifo) {
        out = fifo_[head_++];
        if (head_ > 4096 && head_ * 2 > fifo_.size()) {
          fifo_.erase(fifo_.begin(), fifo_.begin() + static_cast<long>(head_));
          head_ = 0;
        }
      } else if (from == stack) {
        out = stack_.back();
        stack_.pop_back();
      } else {
        out = heap_.front();
        std::pop_heap(heap_.begin(), heap_.end(), after);
        heap_.pop_back();
      }
      if (valid(out))
        return true;
    }
  }

  /// Drops every entry that fails `valid`.
  template <class Valid>
  void compact(Valid valid) {
    compact(valid, [](uint32_t) {});
  }

  /// Also calls `touch(id)` with the entry some places ahead of the one `valid` judges: `valid`
  /// reads what an entry's id points to, scattered through memory, and a sweep of thousands of
  /// entries that waits for each read in turn is a pause of milliseconds under a step.
  template <class Valid, class Touch>
  void compact(Valid valid, Touch touch) {
    fifo_.erase(fifo_.begin(), fifo_.begin() + static_cast<long>(head_));
    head_ = 0;
    keep_valid(fifo_, valid, touch);
    keep_valid(stack_, valid, touch);
    keep_valid(heap_, valid, touch);
    std::make_heap(heap_.begin(), heap_.end(), after);
  }

  /// Calls f(entry) for every entry, stale or not.
  template <class F>
  void for_each(F f) const {
    for (size_t i = head_; i < fifo_.size(); ++i)
      f(fifo_[i]);
    for (const entry& e : stack_)
      f(e);
    for (const entry& e : heap_)
      f(e);
  }

  size_t size() const { return fifo_.size() - head_ + stack_.size() + heap_.size(); }

  void clear() {
    fifo_.clear();
    stack_.clear();
    heap_.clear();
    head_ = 0;
  }

 private:
  static constexpr size_t prefetch_far = 8, prefetch_near = 4;
  static bool after(const entry& a, const entry& b) { return before(b, a); }

  // std::remove_if with `touch` called `compact_ahead` entries ahead: the kept entries keep
  // their order.
  template <class V, class Valid, class Touch>
  static void keep_valid(V& v, Valid& valid, Touch& touch) {
    constexpr size_t compact_ahead = 8;
    size_t kept = 0, n = v.size();
    for (size_t i = 0; i < std::min(compact_ahead, n); ++i)
      touch(v[i].id);
    for (size_t i = 0; i < n; ++i) {
      if (i + compact_ahead < n)
        touch(v[i + compact_ahead].id);
      if (valid(v[i]))
        v[kept++] = v[i];
    }
    v.resize(kept);
  }

  std::vector<entry, huge_page_allocator<entry>> fifo_;  // entries in key order from head_
  size_t head_ = 0;
  std::vector<entry> stack_;  // entries in descending key order: the back is the smallest
  std::vector<entry> heap_;  // std heap with the smallest key on top
};

}  // namespace kvtier
