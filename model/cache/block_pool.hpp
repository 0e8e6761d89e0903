#pragma once

// A pool of fixed-size KV blocks of one tier (device or host), named by dense ids.
//
// A block is free, used, or retired. Retired means: its owner released it while a transfer still
// touches it (an in-flight D2H reads it, an H2D or storage read writes it). A retired block goes
// back to the free list when its last pin goes; allocate() may hand it out earlier only when the
// caller accepts reuse-after-transfer (the new owner must then wait for the pins to clear before
// writing; the FastDeploy hazard of reusing a block under an in-flight D2H is exactly this wait
// going missing).
//
// Invariants: free + used + retired == capacity; a free block has no pins.
// Allocation is all or nothing, LIFO over released ids (as FastDeploy's free list), and fresh ids
// are handed out lazily so that a huge capacity costs nothing until it is used.

#include <cstdint>
#include <vector>

#include "core/check.hpp"
#include "core/huge_page_allocator.hpp"

namespace kvtier {

using block_id = uint32_t;

class block_pool {
 public:
  enum class state : uint8_t { free, used, retired };

  explicit block_pool(uint32_t capacity = 0);

  // -- observers ------------------------------------------------------------------------------

  uint32_t capacity() const { return capacity_; }
  uint32_t free_count() const { return capacity_ - used_ - retired_; }
  uint32_t used_count() const { return used_; }
  uint32_t retired_count() const { return retired_; }
  /// Ids below this were handed out at least once; all others are free and unpinned.
  uint32_t touched_count() const { return next_fresh_; }
  state block_state(block_id id) const;
  uint32_t pins(block_id id) const;
  /// Starts loading block `id`'s entry (for callers working through a batch of blocks).
  void prefetch(block_id id) const {
    if (id < slots_.size())
      __builtin_prefetch(&slots_[id]);
  }

  // -- allocation -----------------------------------------------------------------------------

  /// Appends `n` free block ids to `out`, or appends nothing and returns false when fewer than
  /// `n` are free. With `reuse_retired`, retired blocks count as free (taken after the free
  /// ones); such a block keeps its pins, which the caller must wait for before writing it.
  bool allocate(uint32_t n, std::vector<block_id>& out, bool reuse_retired = false);

  /// Gives a used block back: it becomes free, or retired while pinned.
  void release(block_id id);

  // -- transfers ------------------------------------------------------------------------------

  /// A transfer starts touching the block (reading or writing it).
  void pin(block_id id) {
    slot& s = touched(id);
    KVTIER_ASSERT(s.st != state::free);
    ++s.pins;
  }
  /// A transfer stops touching the block; a retired block with no pins left becomes free.
  void unpin(block_id id) {
    slot& s = touched(id);
    KVTIER_ASSERT(s.pins > 0);
    if (--s.pins == 0 && s.st == state::retired)
      free_retired(id);
  }

  /// Frees everything; requires that no block is pinned.
  void reset();

 private:
  struct slot {
    state st = state::free;
    uint32_t pins = 0;
  };
  slot& touched(block_id id) {
    KVTIER_ASSERT(id < slots_.size());
    return slots_[id];
  }
  void free_retired(block_id id);

  uint32_t capacity_;
  uint32_t used_ = 0;
  uint32_t retired_ = 0;
  block_id next_fresh_ = 0;        // ids >= next_fresh_ were never handed out
  std::vector<block_id> free_;     // released ids, reused last-in first-out
  std::vector<block_id> retired_list_;
  std::vector<slot, huge_page_allocator<slot>> slots_;        // grows with next_fresh_
};

}  // namespace kvtier
