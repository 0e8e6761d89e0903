#pragma once

// Runs the four actors over a trace: the clocks and the run loops. In virtual time (the default)
// CAF's deterministic test coordinator drives everything: drain every mailbox, then jump the
// clock to the next timer, until nothing is left; no wall clock is read on that path, so
// identical inputs give identical results. In wall-clock time the same actors run on CAF's
// work-stealing scheduler and wait for real (optionally sped up: `speed` virtual seconds per
// wall second).

#include <cstdint>
#include <functional>
#include <memory>

#include "model/front_end/request_feed.hpp"
#include "runtime/config/deployment_plan.hpp"
#include "sim/report/full_result.hpp"
#include "sim/report/tier_occupancy.hpp"

namespace kvtier {

struct full_run_options {
  clock_mode mode = clock_mode::virtual_time;
  double speed = 1.0;       ///< wall mode: virtual seconds per wall second
  uint32_t threads = 2;     ///< wall mode: scheduler threads
  /// Called between rounds of messages (virtual mode) or polls (wall mode).
  std::function<void()> progress;
  /// Wall mode: called at every poll (about every 5 ms) with the replay's virtual time, so that
  /// a caller can act at a virtual instant it chooses (a test kills a storage node at 2.5 s).
  std::function<void(int64_t virtual_now_ns)> on_poll;
  /// When set, every cache controller reports its block events to it (timeseries.csv).
  tier_occupancy_sampler* occupancy = nullptr;
};

/// Replays what `feed` gives through the deployment `plan` describes (runtime/deployment.hpp
/// makes its GPU and storage backend and spawns it). Bad input met by the feed throws
/// trace_error or config_error once the requests already in flight have settled.
full_result run_full_replay(deployment_plan plan, std::shared_ptr<request_feed> feed,
                            const full_run_options& options);

}  // namespace kvtier
