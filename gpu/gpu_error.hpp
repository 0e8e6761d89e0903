#pragma once

// The one exception type of the GPU backend. A failed CUDA call, a request the backend rejects
// (a block id out of range, a bad shape) and a missing device all end up here, with a text that
// alone explains the failure: a run on the GPU host leaves nothing but its log.

#include <stdexcept>

namespace kvtier::gpu {

/// Raised by every operation of the GPU backend that cannot do what it was asked.
class gpu_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace kvtier::gpu
