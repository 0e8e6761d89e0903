#pragma once

// The real backend's step compute: each step of the scheduler runs on the GPU as busy kernels,
// the step's overhead first, then layer by layer, each layer waiting for its part of the step's
// swap-in (the emulation that docs/gpu.md calibrates). It answers when the step's last kernel
// has run, with the time layers waited for their data.

#include <memory>

#include "actors/device/compute_device.hpp"
#include "actors/messages.hpp"

namespace kvtier {

/// Its compute completions must be posted to it as (gpu_done_atom, op, -1).
gpu_compute_actor spawn_gpu_compute(caf::actor_system& sys,
                                    std::shared_ptr<compute_device> device);

}  // namespace kvtier
