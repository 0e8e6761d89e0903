#pragma once

// The trace as read: what a full replay counts apart from the requests that finished.

#include <cstdint>

namespace kvtier {

struct trace_totals {
  uint64_t input_tokens = 0;
  uint64_t output_tokens = 0;
  uint64_t blocks = 0;  ///< prompt blocks; a request too large for the device: ceil(input / block)
};

}  // namespace kvtier
