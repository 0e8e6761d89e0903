#pragma once

// The storage pool every instance of a deployment shares (storage.*): its capacity and media,
// and where its blocks' bytes go.

#include <cstdint>

#include "actors/storage/storage.hpp"
#include "runtime/config/options.hpp"
#include "runtime/config/replay_config.hpp"
#include "storage/storage_backend.hpp"

namespace kvtier {

struct storage_plan {
  /// The storage actor's options: capacity, nodes, modelled media, pool policy; the faults and
  /// the backend itself are added by whoever runs it (resolve_plan, prepare_storage).
  storage_options pool;
  /// storage.backend and how it reaches its nodes.
  backend_options backend;
  /// Bytes per stored block (storage.payload_bytes, else a block's bytes); 0 for `model`. On the
  /// GPU a block's payload is its host block: prepare_gpu sets the device's block size here.
  uint64_t payload_bytes = 0;
  /// Payload bytes in flight to and from storage at once, over every instance
  /// (storage.max_inflight_bytes); 0: unset, the machine's default, set by prepare_storage.
  uint64_t max_inflight_bytes = 0;
};

/// The storage.* keys over the run's model and pool (`run`); throws config_error when a
/// backend's list does not match storage.nodes or an address does not parse.
storage_plan resolve_storage(const config& c, const replay_config& run);

}  // namespace kvtier
