#pragma once

// The cache-controller actor: controller_core behind messages. It answers the scheduler's
// arrivals (after a storage lookup and prefetch), probes and commits, sends the transfers the
// model orders to the transfer engine, and answers a commit only when the step's inputs are in
// device memory: its swap-in has landed layer by layer, and every copy still touching a block the
// step computes into has finished.

#include "model/controller/controller_core.hpp"
#include "actors/messages.hpp"

namespace kvtier {

cache_controller_actor spawn_cache_controller(caf::actor_system& sys, const cache_options& cache,
                                              const controller_options& options,
                                              storage_actor storage,
                                              transfer_engine_actor engine);

}  // namespace kvtier
