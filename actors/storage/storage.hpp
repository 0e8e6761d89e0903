#pragma once

// The storage actor: the L3 pool (one or several nodes) behind batch exists / get / put. It keeps
// which blocks are stored (storage_index: capacity, LRU per node, keys namespaced by model and
// dtype) and models each node's media: every request pays `op_latency` and then moves its bytes
// at the node's read or write bandwidth, shared fairly with the other requests on that node.
// A get leases its keys (they cannot be evicted) until the transfer engine releases them.

#include <cstdint>

#include "actors/protocol.hpp"
#include "actors/sim_clock.hpp"

namespace kvtier {

struct storage_options {
  uint64_t capacity_blocks = 0;
  uint32_t nodes = 1;
  double read_gbps = 10;   ///< per node
  double write_gbps = 5;   ///< per node
  int64_t op_latency_ns = 100'000;
  sim_clock clock;
};

storage_actor spawn_storage(caf::actor_system& sys, const storage_options& options);

}  // namespace kvtier
