#pragma once

// The invariant checker of the cache model, callable at any time. It recomputes from scratch what
// the model maintains incrementally and compares:
//  - tree structure: links, child counts, the hash map, prefix closure (radix_tree.hpp T1-T3);
//  - evictable sets: membership exactly as T4 defines it, counts, one heap entry per member, and
//    the next victim being the member with the smallest key (T5);
//  - block conservation per pool: free + retired + private + node-owned == capacity, no block
//    owned twice, node-owned blocks in state used;
//  - transfers: every pin belongs to an outstanding order, every filling copy has its order, no
//    free block is pinned (so none is reused while a transfer reads or writes it).
// With `quiescent` (the end of a replay) it also requires that nothing is held, private, retired
// or outstanding.

#include <cstdint>
#include <string>
#include <vector>

#include "model/cache/cache_model.hpp"

namespace kvtier {

struct invariant_report {
  uint64_t checked = 0;     ///< conditions evaluated
  uint64_t violations = 0;  ///< conditions that failed
  std::vector<std::string> messages;  ///< the first few failures, in words

  /// Counts one condition; `what` (a callable returning the text) runs only on failure.
  template <class What>
  void expect(bool ok, What&& what) {
    ++checked;
    if (!ok)
      fail(what());
  }
  void fail(std::string what);
  bool ok() const { return violations == 0; }
  void merge(const invariant_report& other);
};

void check_invariants(const cache_model& model, bool quiescent, invariant_report& report);

}  // namespace kvtier
