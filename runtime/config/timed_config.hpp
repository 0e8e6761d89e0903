#pragma once

// The settings of a timed replay, resolved from the config keys for each actor.

#include <vector>

#include "core/run_modes.hpp"
#include "model/controller/controller_core.hpp"
#include "model/front_end/router.hpp"
#include "actors/instance.hpp"
#include "actors/scheduler/scheduler.hpp"
#include "actors/storage/storage.hpp"
#include "actors/transfer_engine/transfer_engine.hpp"
#include "runtime/config/replay_config.hpp"

namespace kvtier {

/// The fields up to `engine` configure one instance: the only one, unless `instances` lists the
/// deployment (cluster.instances), each with its own settings.
struct timed_config {
  cache_options cache;
  controller_options controller;
  scheduler_config scheduler;
  transfer_engine_options engine;
  storage_options storage;
  uint64_t block_bytes = 0;
  double time_scale = 1;  ///< the front end stretches recorded arrivals and think times
  router_options router;
  /// PD: prefill and decode instances (cluster.instances roles) and the handoff between them.
  bool disaggregated = false;
  pd_options pd;
  /// The deployment, when it is more than one mixed instance configured as above.
  std::vector<instance_config> instances;
  /// The real backend: PCIe transfers and step compute on the CUDA device (wall clock only).
  copy_backend_kind backend = copy_backend_kind::modelled;
  cuda_device_options cuda_options;
  /// Where stored blocks' bytes go (storage.backend ...); made when the replay starts.
  backend_options storage_backend;
  /// Bytes per stored block for a byte-carrying backend without the GPU (storage.payload_bytes).
  uint64_t storage_payload_bytes = 0;
  /// Payload bytes in flight to and from storage (storage.max_inflight_bytes); 0: unset, the
  /// machine's default (prepare_storage).
  uint64_t storage_max_inflight_bytes = 0;
  /// The controller is a live server's (kvtier engine-sim); empty: the instance's own.
  controller_factory remote_controller;
  std::shared_ptr<compute_device> remote_compute;  ///< with remote_controller: real compute
};

timed_config resolve_timed(const config& c, const replay_config& rc);

/// Reads the calibration files the config names (links.calibration, storage.calibration) and
/// throws config_error as resolve_timed would: a hit-rate replay uses neither, but a file given
/// is checked all the same, so that a mistake is not found only when a timed run starts.
void check_calibrations(const config& c);

/// Switches `t` to the real backend: a KV cache of the model's shape and the configured device
/// and host blocks on the GPU; with `verify`, every block is checked wherever it lands.
void use_cuda_backend(timed_config& t, const replay_config& rc, bool verify);

}  // namespace kvtier
