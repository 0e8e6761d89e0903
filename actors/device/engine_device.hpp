#pragma once

// `kvtier engine-sim --backend cuda`: the engine's side of a real GPU attach. It owns the KV
// tensors (one allocation per layer, exported with CUDA IPC) and IPC events (event_slots x
// layers) that it hands to kvtier serve in hello; serve runs its swap-ins into these tensors and
// records a slot's events behind each layer. A step's compute then waits, layer by layer, on
// that slot's events in the engine's own stream (cudaStreamWaitEvent: no polling), and with
// --verify every swapped-in block's bytes are checked against its hash's pattern once the
// step's compute (and so every layer event) has passed.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actors/device/compute_device.hpp"
#include "gpu/kv_cache.hpp"

namespace kvtier {

struct engine_device_options {
  model_shape shape;        ///< the KV one rank caches (replay_config::model)
  uint32_t block_size = 0;  ///< tokens per block
  uint32_t device_blocks = 0;
  uint32_t event_slots = 4;
  bool verify = false;
};

/// What --verify found.
struct engine_verify_counts {
  uint64_t swap_ins = 0;      ///< swap-ins whose blocks were checked
  uint64_t blocks = 0;        ///< blocks checked
  uint64_t mismatches = 0;    ///< blocks whose bytes were not their pattern
  std::string first;          ///< the first mismatch, described
};

class engine_device final : public compute_device {
 public:
  /// Allocates the tensors and creates the events; throws gpu::gpu_error.
  explicit engine_device(const engine_device_options& options);

  std::vector<gpu::layer_tensor_handle> tensors() const { return tensors_; }
  std::vector<gpu::ipc_handle> events() const { return events_; }
  uint32_t event_slots() const { return options_.event_slots; }
  uint32_t device_blocks() const { return options_.device_blocks; }
  std::string device_name() const;

  /// A step reply said that a swap-in into `blocks` runs behind `slot`'s events, recorded
  /// already. Returns the id a compute request names it by (its after_swap_in).
  uint64_t expect_swap_in(uint32_t slot, std::vector<gpu::block_pattern> blocks);

  /// Waits, in the engine's stream, for every layer event of `slot`, then checks `blocks`
  /// (with --verify or not): the bench's check. Returns the blocks that mismatched.
  uint64_t wait_and_check(uint32_t slot, const std::vector<gpu::block_pattern>& blocks);

  engine_verify_counts verified() const;

  void set_compute_sink(sink computes) override;
  uint64_t submit_compute(uint64_t step, int64_t lead_ns, std::vector<int64_t> layer_ns,
                          uint64_t after_swap_in) override;
  std::pair<uint64_t, int64_t> compute_completed(uint64_t op) override;

 private:
  struct pending_swap_in {
    uint32_t slot = 0;
    std::vector<gpu::block_pattern> blocks;
  };
  struct running_compute {
    uint64_t step = 0;
    std::vector<gpu::block_pattern> check;  ///< --verify: the swap-in it waited for
  };

  std::vector<uint32_t> slot_events(uint32_t slot) const;
  /// Checks blocks; counts each one that mismatches. Caller holds the lock.
  uint64_t check_locked(const std::vector<gpu::block_pattern>& blocks);

  engine_device_options options_;
  std::unique_ptr<gpu::kv_cache> cache_;
  std::vector<gpu::layer_tensor_handle> tensors_;
  std::vector<gpu::ipc_handle> events_;
  mutable std::mutex mutex_;
  sink computes_;
  std::map<uint64_t, pending_swap_in> swap_ins_;  // by id, until its compute is submitted
  std::map<uint64_t, running_compute> computes_running_;  // by op
  uint64_t next_swap_in_ = 1;
  engine_verify_counts counts_;
};

}  // namespace kvtier
