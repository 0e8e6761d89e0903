#pragma once

// The transfer engine: moves blocks between device and host memory and between host memory and
// storage. PCIe transfers run on the real backend (CUDA, cuda_backend.hpp) when one is given,
// else on the modelled links (link_model.hpp):
//   h2d, d2h   PCIe, one per direction;
//   pcie       both directions together (duplex cap: one direction alone gets its own limit, both
//              at once share this one);
//   nic        the host's link to the storage nodes.
// A swap-in moves layer by layer (one operation per layer: latency, then K and V of every block
// of that layer) and reports when each layer was in device memory; a D2H moves all layers in one
// operation; a load asks storage for the blocks (the node's media time) and then crosses the nic;
// a store crosses the nic, then storage writes. A transfer starts once the transfers it must
// follow are done.

#include <cstdint>
#include <string>

#include <memory>

#include "actors/protocol.hpp"
#include "actors/sim_clock.hpp"
#include "actors/transfer_engine/cuda_backend.hpp"

namespace kvtier {

struct link_options {
  double h2d_gbps = 55;
  double d2h_gbps = 55;
  double duplex_gbps = 100;
  int64_t h2d_layer_latency_ns = 5'000;  ///< per layer of a swap-in
  int64_t d2h_latency_ns = 10'000;       ///< per D2H transfer
  double nic_gbps = 25;
  int64_t nic_latency_ns = 20'000;
};

struct transfer_engine_options {
  link_options links;
  uint32_t layers = 32;
  uint64_t block_bytes = 0;  ///< K and V of every layer of one block
  sim_clock clock;
  /// The real backend (null: modelled). PCIe transfers and step compute then run on the GPU;
  /// storage transfers stay modelled. Completions must be posted to the engine as
  /// (gpu_done_atom, op, layer).
  std::shared_ptr<cuda_backend> gpu;
  /// Storage keeps bytes (storage.backend is not `model`): each store sends every block's bytes
  /// (the host block's on the real backend, else this many bytes of the block's hash pattern) and
  /// each load checks what comes back. 0: storage carries no bytes.
  uint64_t storage_payload_bytes = 0;
};

transfer_engine_actor spawn_transfer_engine(caf::actor_system& sys,
                                            const transfer_engine_options& options,
                                            storage_actor storage);

}  // namespace kvtier
