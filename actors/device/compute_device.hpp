#pragma once

// What the GPU compute actor (gpu_compute.hpp) runs a step's compute on: the replay's own CUDA
// cache, whose swap-ins it orders compute after (cuda_device.hpp), or an engine stand-in whose
// swap-ins another process runs into its tensors and signals through IPC events
// (engine_device.hpp).

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace kvtier {

class compute_device {
 public:
  /// (op, layer): layer -1 means the whole op completed. Runs on a CUDA thread.
  using sink = std::function<void(uint64_t op, int layer)>;
  virtual ~compute_device() = default;
  /// Where compute completions go (the compute actor), before the first compute.
  virtual void set_compute_sink(sink computes) = 0;
  /// Runs a step: `lead_ns` first, then layer l after layer l of swap-in `after_swap_in` (0:
  /// none). Returns the op, or 0 when it is parked until that swap-in is submitted (its
  /// completion comes all the same).
  virtual uint64_t submit_compute(uint64_t step, int64_t lead_ns, std::vector<int64_t> layer_ns,
                                  uint64_t after_swap_in) = 0;
  /// The compute op completed: the step it ran and the time its layers waited for data.
  virtual std::pair<uint64_t, int64_t> compute_completed(uint64_t op) = 0;
};

}  // namespace kvtier
