#pragma once

// The transfer engine: moves blocks between device and host memory and between host memory and
// storage. Device and host copies run on the copy backend its options name (copy_backend.hpp):
// the modelled PCIe links or the GPU, checked or not. A swap-in reports when each layer was in device memory; a D2H moves all
// layers at once. Storage traffic crosses the host's network link (`nic`, modelled) and the
// storage node's media (the storage actor's) at once, streaming: a load's get and a store's put
// run beside its nic flow, and the transfer ends when both have, as long as the slower link
// takes. A transfer starts once the transfers it must follow are done.

#include <cstdint>
#include <memory>
#include <string>

#include "actors/device/cuda_device.hpp"
#include "actors/messages.hpp"
#include "actors/transfer_engine/copy_backend.hpp"
#include "core/sim_clock.hpp"

namespace kvtier {

struct link_options {
  double h2d_gbps = 55;
  double d2h_gbps = 55;
  double duplex_gbps = 100;
  int64_t h2d_layer_latency_ns = 5'000;  ///< per layer of a swap-in
  int64_t d2h_latency_ns = 10'000;       ///< per D2H transfer
  double nic_gbps = 25;
  int64_t nic_latency_ns = 20'000;
  /// Compute side: each layer of a step that follows a swap-in waits this long on its copy
  /// event (links.h2d_layer_wait_us; the scheduler charges it, layer_pipeline.hpp).
  int64_t h2d_layer_wait_ns = 0;
  /// Host time per swapped-in block before the step's compute follows the swap-in
  /// (links.h2d_submit_us_per_block; the scheduler charges it, layer_pipeline.hpp).
  int64_t h2d_submit_ns_per_block = 0;
};

struct transfer_engine_options {
  link_options links;
  uint32_t layers = 32;
  uint64_t block_bytes = 0;  ///< K and V of every layer of one block
  sim_clock clock;
  /// Where device and host copies run: the modelled links unless the deployment chose the GPU
  /// (use_cuda_copies, cuda_copies.hpp). Storage transfers stay modelled either way.
  copy_backend_factory copies = make_modelled_copies;
  /// The GPU that `copies` run on, set with them by use_cuda_copies (null: modelled). The
  /// instance runs its step compute there, and the GPU's copy completions must be posted to the
  /// engine as (gpu_done_atom, op, layer).
  std::shared_ptr<cuda_device> gpu;
  /// Storage keeps bytes (storage.backend is not `model`): each store sends every block's bytes
  /// (the copy backend's: the host block's on the GPU, else this many bytes of the block's hash
  /// pattern) and each load checks what comes back. 0: storage carries no bytes.
  uint64_t storage_payload_bytes = 0;
  /// Payload bytes this engine may have handed to storage and not yet had answered
  /// (storage.max_inflight_bytes, shared out over the instances); a store past it waits, as on a
  /// busy link to storage. 0: no bound.
  uint64_t storage_inflight_bytes = 0;
};

transfer_engine_actor spawn_transfer_engine(caf::actor_system& sys,
                                            const transfer_engine_options& options,
                                            storage_actor storage);

}  // namespace kvtier
