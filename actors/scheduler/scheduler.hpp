#pragma once

// The scheduler actor: the serving engine's loop. Requests arrive from the front end (one
// message each, answered when the request finishes), become ready once the controller has
// prefetched what storage holds for them, and are batched
// step by step (batch_planner.hpp). A step is one commit to the controller; when the grant comes
// back the step's compute runs layer by layer (cost_model.hpp, layer_pipeline.hpp) and ends on a
// timer, at which point tokens are sampled and finished requests leave.

#include <functional>
#include <vector>

#include "model/pd/pd_options.hpp"
#include "actors/messages.hpp"
#include "model/scheduler/batch_planner.hpp"
#include "model/scheduler/cost_model.hpp"
#include "core/sim_clock.hpp"

namespace kvtier {

struct scheduler_config {
  scheduler_options options;
  compute_profile compute;
  uint32_t device_blocks = 0;  ///< a request needing more blocks than this is rejected
  sim_clock clock;
  /// Real backend: each step's compute runs on the GPU through this actor (a busy kernel per
  /// layer, each waiting for its layer of the step's swap-in), instead of on a timer.
  gpu_compute_actor gpu_compute;
  /// PD (docs/cluster.md): a prefill instance hands every request off after its first token; a
  /// decode instance preallocates requests and decodes them once their KV is in place. Handed
  /// off KV moves through this instance's transfer engine (pd.transfer = storage).
  pd_role role = pd_role::mixed;
  pd_options pd;
  /// cache.output_caching (FastDeploy --enable-output-caching): a decode or mixed instance
  /// writes a finished request's prompt and output blocks to storage before freeing them.
  bool output_caching = false;
  uint64_t block_bytes = 0;
  transfer_engine_actor engine;
  storage_actor storage;  ///< a storage handoff waits until its blocks are visible there
};

scheduler_actor spawn_scheduler(caf::actor_system& sys, const scheduler_config& config,
                                cache_controller_actor controller);

}  // namespace kvtier
