#pragma once

// Connects the cache controller's block events to a publisher: the events of one controller
// message (one step, one finished transfer, ...) become one published batch. Runs on the
// controller's thread; publish() only queues.

#include <vector>

#include "model/cache/block_events.hpp"
#include "observe/events/event_publisher.hpp"

namespace kvtier {

class publishing_sink final : public block_event_sink {
 public:
  explicit publishing_sink(event_publisher& publisher) : publisher_(publisher) {}

  void stored(tier where, block_hash hash, std::optional<block_hash> parent,
              uint32_t tokens) override {
    log_.stored(where, hash, parent, tokens);
  }
  void removed(tier where, block_hash hash) override { log_.removed(where, hash); }
  void cleared() override { log_.cleared(); }
  void batch_end() override {
    if (!log_.empty())
      publisher_.publish(log_.take());
  }

 private:
  event_publisher& publisher_;
  block_event_log log_;
};

}  // namespace kvtier
