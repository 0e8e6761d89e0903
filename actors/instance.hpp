#pragma once

// An instance: one serving engine as kvtier models it. Its scheduler batches requests, its cache
// controller owns the block index with the instance's own device and host tiers, and its
// transfer engine moves blocks; the storage pool is shared by every instance of a deployment.
// A cluster is a list of instances behind one front end.

#include <functional>
#include <string>

#include "model/controller/controller_core.hpp"
#include "actors/device/compute_device.hpp"
#include "actors/messages.hpp"
#include "actors/scheduler/scheduler.hpp"
#include "actors/transfer_engine/transfer_engine.hpp"

namespace kvtier {

/// Makes the instance's cache controller elsewhere (a live server: serve/remote_controller.hpp);
/// the instance then spawns no controller or transfer engine of its own.
using controller_factory =
  std::function<cache_controller_actor(caf::actor_system&, const sim_clock&)>;

/// A live server's cache controller in place of the instance's own (kvtier engine-sim).
struct remote_controller {
  controller_factory spawn;  ///< empty: the instance's own controller
  /// The GPU the step compute runs on (engine-sim --backend cuda); null: modelled compute.
  std::shared_ptr<compute_device> compute;

  explicit operator bool() const { return static_cast<bool>(spawn); }
};

struct instance_config {
  std::string name = "mixed-0";
  pd_role role = pd_role::mixed;
  cache_options cache;
  controller_options controller;
  scheduler_config scheduler;
  transfer_engine_options engine;
  remote_controller remote;
};

struct instance {
  std::string name;
  pd_role role = pd_role::mixed;
  scheduler_actor scheduler;
  cache_controller_actor controller;
  transfer_engine_actor engine;  ///< none with a remote controller
  gpu_compute_actor compute;  ///< real backend only
};

/// An instance's block machinery without its scheduler: what `kvtier serve` runs beside an
/// engine, whose own scheduler takes the scheduler's place.
struct controller_stack {
  transfer_engine_actor engine;
  cache_controller_actor controller;
};

/// Spawns a transfer engine and a cache controller against the shared `storage`. On the GPU
/// (`engine.gpu`) the device's copy completions go to that engine.
controller_stack spawn_controller_stack(caf::actor_system& sys, const cache_options& cache,
                                        const controller_options& controller,
                                        const transfer_engine_options& engine,
                                        const storage_actor& storage);

/// Spawns the instance's three actors against the shared `storage`.
instance spawn_instance(caf::actor_system& sys, const instance_config& config,
                        const storage_actor& storage);

/// Stops the instance's actors.
void stop_instance(const instance& x);

}  // namespace kvtier
