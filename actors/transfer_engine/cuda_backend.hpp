#pragma once

// The transfer engine's real backend: the CUDA KV cache (gpu/kv_cache.hpp) carrying the engine's
// device and host transfers, and the step compute emulated on the GPU. No storage system is
// attached: storage transfers stay modelled, but with --verify the bytes a store reads out of
// host memory are kept and a load writes exactly those bytes back, so a block's round trip
// through every tier is checked against its pattern.
//
// Not thread-safe, like the cache: only the transfer-engine actor calls it. Completions arrive
// through the callback given at construction, on a CUDA thread.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "actors/protocol.hpp"
#include "gpu/kv_cache.hpp"

namespace kvtier {

struct cuda_backend_options {
  gpu::kv_shape shape;
  uint32_t device_blocks = 0;
  uint32_t host_blocks = 0;
  bool verify = false;
  uint64_t payload_limit_bytes = 16ull << 30;  ///< --verify: stored bytes kept, at most
};

class cuda_backend {
 public:
  cuda_backend(const cuda_backend_options& options, gpu::completion_callback on_complete);

  std::string device_name() const;
  uint64_t block_bytes() const { return options_.shape.host_block_bytes(); }

  /// Starts a swap-in (layer by layer) or a D2H; returns the op.
  uint64_t submit(const transfer& t);
  /// Marks the device blocks a step produced with their patterns (ordered before later D2Hs).
  void fill(const transfer& t);
  /// After a swap-in: whether its blocks arrived intact (empty) or what is wrong.
  std::string check_arrived(const transfer& t);
  /// A store read these host blocks: keep their bytes (--verify).
  std::string keep(const transfer& t);
  /// A load wrote these host blocks: put the kept bytes there and check them (--verify).
  std::string restore(const transfer& t);
  /// A byte-carrying storage backend keeps the bytes instead: a copy of a host block for a put,
  /// and a get's bytes written into the host block (checked against its pattern with --verify).
  std::vector<uint8_t> host_payload(uint32_t host_block);
  std::string restore_payload(const block_move& b, const std::vector<uint8_t>& payload);

  /// Runs a step on the GPU: `lead_ns` first, then layer l after the swap-in op's layer l
  /// (0: none).
  uint64_t submit_compute(int64_t lead_ns, const std::vector<int64_t>& layer_ns, uint64_t after_op);
  int64_t stall_of(uint64_t compute_op);
  int64_t duration_of(uint64_t transfer_op);
  void release(uint64_t op);

 private:
  cuda_backend_options options_;
  std::unique_ptr<gpu::kv_cache> cache_;
  absl::flat_hash_map<uint64_t, std::vector<std::byte>> stored_;  // by storage key
  uint64_t stored_bytes_ = 0;
};

}  // namespace kvtier
