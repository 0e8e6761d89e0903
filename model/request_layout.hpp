#pragma once

// Which blocks cover a request's first N tokens. A request's blocks are its listed prompt blocks
// (named by trace ids or token hashes, shareable through the cache), then private blocks of
// `block_size` tokens for everything after them: prompt tokens that no listed block covers
// (agentic traces list full blocks only) and generated tokens (traces carry no ids for output,
// so generated blocks are never shared). Scheduler and controller count blocks with this one rule.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/block_hash.hpp"

namespace kvtier {

class request_layout {
 public:
  request_layout() = default;
  request_layout(const std::vector<cache_block>& blocks, uint32_t block_size)
    : block_size_(block_size) {
    ends_.reserve(blocks.size());
    uint64_t end = 0;
    for (const auto& b : blocks)
      ends_.push_back(end += b.tokens);
  }

  uint32_t listed() const { return static_cast<uint32_t>(ends_.size()); }
  uint64_t listed_tokens() const { return ends_.empty() ? 0 : ends_.back(); }
  /// Tokens of listed block i.
  uint64_t tokens_of(uint32_t i) const { return ends_[i] - (i ? ends_[i - 1] : 0); }

  /// Blocks needed to hold the first `tokens` tokens.
  uint32_t blocks_for(uint64_t tokens) const {
    if (tokens == 0)
      return 0;
    uint64_t covered = listed_tokens();
    if (tokens >= covered)  // past the list (a decoding request's every step): no search
      return listed() + static_cast<uint32_t>((tokens - covered + block_size_ - 1) / block_size_);
    // the listed block that holds token `tokens - 1`, and every one before it
    auto holder = std::lower_bound(ends_.begin(), ends_.end(), tokens);
    return static_cast<uint32_t>(holder - ends_.begin()) + 1;
  }

  /// Turns the next `count` private blocks into listed ones (a preemption named them); block
  /// counts stay as they were, since private blocks hold `block_size` tokens each.
  void list_private_blocks(uint32_t count) {
    for (uint32_t i = 0; i < count; ++i)
      ends_.push_back(listed_tokens() + block_size_);
  }

  uint32_t block_size() const { return block_size_; }

  /// Whether a listed block ends after token `from` and at or before token `to`: computing
  /// [from, to) completes it (complete_within(to) > complete_within(from), with one search).
  bool completes_block(uint64_t from, uint64_t to) const {
    if (from >= listed_tokens())  // past the list (a decoding request's every step): no search
      return false;
    auto next = std::upper_bound(ends_.begin(), ends_.end(), from);
    return next != ends_.end() && *next <= to;
  }
  /// Listed blocks that lie entirely within the first `tokens` tokens (their KV is complete).
  uint32_t complete_within(uint64_t tokens) const {
    return static_cast<uint32_t>(std::upper_bound(ends_.begin(), ends_.end(), tokens)
                                 - ends_.begin());
  }

 private:
  std::vector<uint64_t> ends_;  // cumulative token count at the end of each listed block
  uint32_t block_size_ = 1;
};

}  // namespace kvtier
