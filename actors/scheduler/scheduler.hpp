#pragma once

// The scheduler actor: the serving engine's loop. Requests arrive from the trace (workload.hpp),
// become ready once the controller has prefetched what storage holds for them, and are batched
// step by step (batch_planner.hpp). A step is one commit to the controller; when the grant comes
// back the step's compute runs layer by layer (cost_model.hpp, layer_pipeline.hpp) and ends on a
// timer, at which point tokens are sampled and finished requests leave.

#include <functional>
#include <vector>

#include "actors/protocol.hpp"
#include "actors/scheduler/batch_planner.hpp"
#include "actors/scheduler/cost_model.hpp"
#include "actors/sim_clock.hpp"
#include "sim/trace/trace_request.hpp"

namespace kvtier {

struct scheduler_config {
  scheduler_options options;
  compute_profile compute;
  uint32_t device_blocks = 0;  ///< a request needing more blocks than this is rejected
  double time_scale = 1;       ///< stretches recorded arrivals and think times
  sim_clock clock;
  /// Real backend: each step's compute runs on the GPU through this engine (a busy kernel per
  /// layer, each waiting for its layer of the step's swap-in), instead of on a timer.
  transfer_engine_actor gpu_engine;
};

/// Where requests come from: the trace in recorded order, and the mapping to cache blocks.
struct request_source {
  std::function<bool(trace_request&)> next;
  std::function<void(const trace_request&, std::vector<cache_block>&)> blocks_of;
};

scheduler_actor spawn_scheduler(caf::actor_system& sys, const scheduler_config& config,
                                request_source source, cache_controller_actor controller);

}  // namespace kvtier
