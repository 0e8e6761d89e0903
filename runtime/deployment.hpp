#pragma once

// Running a deployment plan (deployment_plan.hpp): what every front end does to run kvtier's
// actors. The GPU and the storage backend are made before the clock starts; then the storage
// pool, every instance and, when kvtier schedules, the front end are spawned. Replays in virtual
// and wall-clock time (sim/full/full_replay.cpp) and `kvtier serve` (serve/server/server.cpp) run
// their deployments through here.

#include <cstddef>
#include <memory>
#include <vector>

#include "caf/actor_system_config.hpp"

#include "actors/front_end/front_end.hpp"
#include "actors/instance.hpp"
#include "actors/storage/storage.hpp"
#include "runtime/config/deployment_plan.hpp"

namespace kvtier {

/// A CAF config for actors on the wall clock (replays and `kvtier serve`): `threads` workers
/// that, when idle, spin briefly and then wait on their condition variable, quiet logging, and
/// kvtier's message types. Also sets the calling thread's timer slack to 1 ns (Linux), which
/// the threads it starts after inherit: the actors' timers fire when due.
void configure_wall_clock(caf::actor_system_config& cfg, size_t threads);

/// Backend cuda: makes the GPU the plan describes (device and pinned host memory allocated,
/// compute calibrated; an engine's tensors are attached later under `kvtier serve`) and points
/// every instance's copies at it, before the clock starts so that no request is charged for it.
/// Returns it; null for modelled copies.
std::shared_ptr<cuda_device> prepare_gpu(deployment_plan& plan);

/// Makes the byte-carrying storage backend the plan names (connections opened, directories
/// made) before the clock starts, and settles how many payload bytes may be in flight; nothing
/// for `model`. Throws config_error naming what is wrong.
void prepare_storage(deployment_plan& plan);

/// The actors of a running deployment.
struct deployment {
  storage_actor storage;
  std::vector<instance> instances;  ///< in the plan's order
  front_end_actor front_end;        ///< none when an engine schedules
};

/// Spawns the plan's actors on `clock`: the storage pool (which takes the plan's backend: it
/// goes with the actor, before the actor system), every instance, and, when kvtier schedules,
/// the front end over `feed`. Under an engine's scheduling an instance is its cache controller
/// and transfer engine.
deployment spawn_deployment(caf::actor_system& sys, deployment_plan& plan, const sim_clock& clock,
                            std::shared_ptr<request_feed> feed);

/// Stops every actor of `d`.
void stop_deployment(const deployment& d);

}  // namespace kvtier
