#pragma once

// P's KV send link (RDMA), one per prefill instance: a first-come first-served pipe of
// `gbps` with a fixed `latency` per message. Each layer of a prefill chunk is sent once it is
// computed; a layer waits for the link to carry the ones before it.
//
//   start = max(ready, link free);  free = start + bytes / rate;  arrives = free + latency

#include <cstdint>

namespace kvtier {

class pd_link {
 public:
  pd_link(double gbps, int64_t latency_ns) : gbps_(gbps), latency_ns_(latency_ns) {}

  /// Sends `bytes` that are ready at `ready_ns`; returns when they have arrived.
  int64_t send(int64_t ready_ns, uint64_t bytes);

  uint64_t bytes() const { return bytes_; }
  int64_t busy_ns() const { return busy_ns_; }
  uint64_t messages() const { return messages_; }

 private:
  double gbps_;
  int64_t latency_ns_;
  int64_t free_at_ = 0;
  uint64_t bytes_ = 0;
  int64_t busy_ns_ = 0;
  uint64_t messages_ = 0;
};

}  // namespace kvtier
