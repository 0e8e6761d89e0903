#pragma once

// What `kvtier serve` settles before any actor runs: the job's settings checked, the deployment
// planned from the same keys a replay reads (runtime/config/deployment_plan.hpp: one instance, which
// the engine schedules), the GPU opened in real mode and the storage backend made. Every refusal
// is a config_error naming what to change.

#include <cstdint>
#include <memory>

#include "actors/device/cuda_device.hpp"
#include "runtime/config/deployment_plan.hpp"
#include "serve/server/server.hpp"

namespace kvtier::serve {

/// Where lookups are answered (serve.lookups; serve/server/off_actor_lookups.hpp).
enum class lookup_path : uint8_t { actor, published };

/// How many cache-controller stacks serve the engines (serve.controller_stacks; docs/design.md,
/// "Controller stacks"): one for all, or one per engine slot, each with its own controller
/// and transfer engine, sharing the storage pool as a cluster replay's instances do.
enum class controller_stacks : uint8_t { one, per_engine };

struct server_plan {
  deployment_plan deployment;       ///< the actors' options, the storage backend made
  std::shared_ptr<cuda_device> gpu; ///< real mode (--backend cuda); null: modelled copies
  double client_timeout_s = 30;
  uint64_t max_message_bytes = 0;
  int io_threads = 1;  ///< serve.io_threads
  lookup_path lookups = lookup_path::actor;
  controller_stacks stacks = controller_stacks::one;
  /// The deployment's instances, one per stack: one, or serve.engine_slots under per_engine.
  size_t stack_count() const { return deployment.instances.size(); }
};

/// The actor system's workers: one for a single stack (a call's hops stay on one thread), else
/// a worker per stack and one for the server actor, no more than the cores this process may
/// run on.
size_t worker_threads(const server_plan& plan);

/// Checks `job` and prepares what the actors need; throws config_error when it cannot serve.
server_plan plan_server(const serve_job& job);

}  // namespace kvtier::serve
