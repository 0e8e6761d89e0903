#pragma once

// What a full replay returns: every actor's end-of-run report, an instance's apart in a cluster
// and summed over the instances (sim/full/cluster_sum.hpp).

#include <cstdint>
#include <string>
#include <vector>

#include "actors/messages.hpp"
#include "gpu/startup_progress.hpp"
#include "model/pd/pd_options.hpp"

namespace kvtier {

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

}  // namespace kvtier
