#pragma once

// The scheduler actor: the serving engine's loop, as scheduler_core.hpp describes it. The actor
// turns messages into core calls and the core's orders into messages, timers and answers.

#include "actors/messages.hpp"
#include "model/scheduler/scheduler_state.hpp"
#include "core/sim_clock.hpp"

namespace kvtier {

struct scheduler_config : scheduler_core_options {
  sim_clock clock;
  /// Real backend: each step's compute runs on the GPU through this actor (a busy kernel per
  /// layer, each waiting for its layer of the step's swap-in), instead of on a timer.
  gpu_compute_actor gpu_compute;
  transfer_engine_actor engine;
  storage_actor storage;  ///< a storage handoff waits until its blocks are visible there
};

scheduler_actor spawn_scheduler(caf::actor_system& sys, const scheduler_config& config,
                                cache_controller_actor controller);

}  // namespace kvtier
