#pragma once

// Ready blocks per tier over a replay, sampled once a second from the cache controllers' block
// events (model/cache/block_events.hpp) for timeseries.csv (docs/outputs.md). The count of a
// second is the one at its start: nothing changes between two events, so the count before the
// first event of a second is the count at the second's start. A sink only counts; nothing of the
// replay reads it, so a run with the sampler replays as one without. Several instances' controllers
// share one sampler (their counts add); a lock keeps wall-clock runs, whose controllers run on
// threads of their own, consistent.

#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "core/tier.hpp"
#include "model/cache/block_events.hpp"

namespace kvtier {

class tier_occupancy_sampler final : public block_event_sink {
 public:
  /// Samples on `now` (the replay's clock, ns) from here until stop().
  void start(std::function<int64_t()> now);
  /// Events after this are not counted (the actors are being torn down).
  void stop();

  void stored(tier where, block_hash, std::optional<block_hash>, uint32_t) override;
  void removed(tier where, block_hash) override;
  void cleared() override;

  /// Ready blocks per tier at the start of each of the first `seconds` seconds.
  std::vector<per_tier<int64_t>> per_second(size_t seconds) const;

 private:
  void catch_up();  // records the seconds that started before now, at the current counts

  mutable std::mutex lock_;
  std::function<int64_t()> now_;
  per_tier<int64_t> count_{};
  std::vector<per_tier<int64_t>> at_start_;  ///< [k]: the counts at second k's start
};

}  // namespace kvtier
