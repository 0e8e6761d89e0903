#pragma once

// What the block index tells an observer about its tiers: a block became usable in a tier
// (its copy there turned ready), stopped being usable there (a ready copy went away), or the
// whole index was emptied. This is what a cache-aware router needs to follow kvtier's index, and
// what kvtier serve publishes as KV events (docs/events.md). The index calls the sink only when one
// is set; none is by default, so replays neither pay for it nor change.

#include <cstdint>
#include <optional>
#include <vector>

#include "core/block_hash.hpp"
#include "core/tier.hpp"

namespace kvtier {

class block_event_sink {
 public:
  virtual ~block_event_sink() = default;
  /// `hash` is now ready in `where`; `parent` is the block before it (none for a first block).
  virtual void stored(tier where, block_hash hash, std::optional<block_hash> parent,
                      uint32_t tokens) = 0;
  /// `hash` no longer has a ready copy in `where`.
  virtual void removed(tier where, block_hash hash) = 0;
  /// Every block left every tier at once.
  virtual void cleared() = 0;
  /// The controller finished one message (an arrival, a storage answer, a step, a finished
  /// transfer): what it reported since the last batch_end() belongs to one batch.
  virtual void batch_end() {}
};

/// Ends a batch on `sink` (if any) when the scope that changed the index ends, whichever way.
class block_event_batch {
 public:
  explicit block_event_batch(block_event_sink* sink) : sink_(sink) {}
  ~block_event_batch() {
    if (sink_)
      sink_->batch_end();
  }
  block_event_batch(const block_event_batch&) = delete;
  block_event_batch& operator=(const block_event_batch&) = delete;

 private:
  block_event_sink* sink_;
};

enum class block_event_kind : uint8_t { stored, removed, cleared };

struct block_event {
  block_event_kind kind = block_event_kind::stored;
  tier where{};
  block_hash hash = 0;
  std::optional<block_hash> parent;
  uint32_t tokens = 0;
};

/// A sink that keeps the events in order until someone takes them (one batch per take).
class block_event_log final : public block_event_sink {
 public:
  void stored(tier where, block_hash hash, std::optional<block_hash> parent,
              uint32_t tokens) override {
    events_.push_back({block_event_kind::stored, where, hash, parent, tokens});
  }
  void removed(tier where, block_hash hash) override {
    events_.push_back({block_event_kind::removed, where, hash, std::nullopt, 0});
  }
  void cleared() override {
    events_.push_back({block_event_kind::cleared, tier{}, 0, std::nullopt, 0});
  }
  bool empty() const { return events_.empty(); }
  const std::vector<block_event>& events() const { return events_; }
  /// Moves the events out, leaving the log empty.
  std::vector<block_event> take() {
    std::vector<block_event> out;
    out.swap(events_);
    return out;
  }

 private:
  std::vector<block_event> events_;
};

}  // namespace kvtier
