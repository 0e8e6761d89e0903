#include "model/pd/pd_link.hpp"

#include <algorithm>
#include <cmath>

#include "core/time_math.hpp"

namespace kvtier {

int64_t pd_link::send(int64_t ready_ns, uint64_t bytes) {
  int64_t start = std::max(ready_ns, free_at_);
  // GB/s, as every link of kvtier: bytes / gbps nanoseconds
  auto wire = static_cast<int64_t>(std::ceil(static_cast<double>(bytes) / gbps_));
  free_at_ = time_add(start, wire);
  bytes_ += bytes;
  busy_ns_ = time_add(busy_ns_, wire);
  ++messages_;
  return time_add(free_at_, latency_ns_);
}

}  // namespace kvtier
