#pragma once

// Runs the four actors over a trace. In virtual time (the default) CAF's deterministic test
// coordinator drives everything: drain every mailbox, then jump the clock to the next timer, until
// nothing is left; no wall clock is read on that path, so identical inputs give identical
// results. In wall-clock time the same actors run on CAF's work-stealing scheduler and wait for
// real (optionally sped up: `speed` virtual seconds per wall second).

#include <cstdint>
#include <functional>
#include <memory>

#include "gpu/startup_progress.hpp"
#include "model/front_end/request_feed.hpp"
#include "actors/messages.hpp"
#include "runtime/config/timed_config.hpp"
#include "sim/full/tier_occupancy.hpp"

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

/// One instance's reports.
struct instance_result {
  std::string name;
  pd_role role = pd_role::mixed;
  scheduler_report scheduler;
  controller_report controller;
  engine_report engine;
};

/// `scheduler`, `controller` and `engine` sum every instance's (requests in id order); a cluster
/// also has each instance's apart in `instances`.
struct full_result {
  front_end_report front_end;
  std::vector<instance_result> instances;  ///< empty for a single instance
  /// PD: `scheduler.requests` has one record per request, its prefill and its decode joined
  /// (arrival, hits and first token from the prefill instance; finish from the decode one).
  bool disaggregated = false;
  pd_transfer pd_mode = pd_transfer::direct;
  bool drained = false;  ///< every request was answered and the instance holds none
  scheduler_report scheduler;
  controller_report controller;
  engine_report engine;
  storage_report storage;
  uint64_t messages = 0;   ///< messages the actors handled (virtual mode)
  int64_t last_event_ns = 0;
  gpu::startup_timing startup;  ///< real backend: what creating the GPU cache took
};

/// Replays what `feed` gives. Bad input met by the feed throws trace_error or config_error once
/// the requests already in flight have settled.
full_result run_full_replay(const timed_config& config, std::shared_ptr<request_feed> feed,
                            const full_run_options& options);

}  // namespace kvtier
