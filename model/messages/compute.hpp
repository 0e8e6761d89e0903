#pragma once

// A scheduler's messages to the GPU compute (real backend) (docs/design.md, "Layout"). Plain
// structs of ids and integers, with no CAF: the CAF-free cores (model/) take and return them, and
// actors/messages.hpp gives them their inspect() overloads, type IDs and the actors' typed
// interfaces.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "model/messages/ids.hpp"

namespace kvtier {

// -- scheduler -> GPU compute (real backend: the step's compute runs on the GPU) ----------------------

struct compute_request {
  uint64_t step = 0;
  int64_t lead_ns = 0;            ///< the step's overhead, before layer 0, waiting for nothing
  std::vector<int64_t> layer_ns;  ///< busy time of each layer
  uint64_t after_swap_in = 0;     ///< layer i starts once this swap-in's layer i is in place
};

struct compute_done {
  uint64_t step = 0;
  bool ok = true;
  int64_t stall_ns = 0;  ///< time layers waited for their swapped-in data
  std::string error;
};

}  // namespace kvtier
