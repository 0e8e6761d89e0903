#pragma once

// Connects the cache controller's block events to a publisher: the events of one controller
// message (one step, one finished transfer, ...) become one published batch. Runs on the
// controller's thread; publish() only queues.
//
// With a block_origins table (kvtier serve), a block is published under the engine's hash with
// its tokens, and only if the table knows it (docs/events.md, "Block names"); without one, under
// the index's own name.

#include <vector>

#include "model/cache/block_events.hpp"
#include "observe/events/block_origins.hpp"
#include "observe/events/event_publisher.hpp"

namespace kvtier {

class publishing_sink final : public block_event_sink {
 public:
  explicit publishing_sink(event_publisher& publisher, block_origins* origins = nullptr)
    : publisher_(publisher), origins_(origins) {}

  void stored(tier where, block_hash hash, std::optional<block_hash> parent,
              uint32_t tokens) override {
    block_event e{block_event_kind::stored, where, hash, parent, tokens};
    if (!origins_)
      return events_.push_back({e, {}});
    std::optional<block_hash> engine_parent;
    if (parent) {
      engine_parent = origins_->engine_hash(*parent);
      if (!engine_parent)
        return;  // a chain a router could not follow
    }
    auto origin = origins_->hold(where, hash);
    if (!origin)
      return;
    e.hash = origin->engine_hash;
    e.parent = engine_parent;
    events_.push_back({e, std::move(origin->token_ids)});
  }
  void removed(tier where, block_hash hash) override {
    block_event e{block_event_kind::removed, where, hash, std::nullopt, 0};
    if (origins_) {
      auto engine = origins_->release(where, hash);
      if (!engine)
        return;  // never announced
      e.hash = *engine;
    }
    events_.push_back({e, {}});
  }
  void cleared() override {
    if (origins_)
      origins_->clear();
    events_.push_back({{block_event_kind::cleared, tier{}, 0, std::nullopt, 0}, {}});
  }
  void batch_end() override {
    if (!events_.empty()) {
      std::vector<published_event> batch;
      batch.swap(events_);
      publisher_.publish(std::move(batch));
    }
  }

 private:
  event_publisher& publisher_;
  block_origins* origins_;
  std::vector<published_event> events_;
};

}  // namespace kvtier
