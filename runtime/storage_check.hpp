#pragma once

// Before a byte-carrying pool starts: how many payload bytes may be in flight, and whether the
// pool's capacity fits where its bytes go (docs/design.md "Room for the pool"). Used by
// prepare_storage (deployment.cpp).

#include <cstdint>
#include <ostream>

#include "runtime/config/deployment_plan.hpp"

namespace kvtier {

/// This machine's memory (/proc/meminfo); zeros where it cannot be read.
struct machine_memory {
  uint64_t total = 0;
  uint64_t available = 0;
};
machine_memory read_machine_memory();

/// storage.max_inflight_bytes when unset: 1/32 of the machine's memory, between 256 MiB and
/// 1 GiB.
uint64_t default_inflight_bytes(const machine_memory& m);

/// Compares the pool's capacity x payload bytes (as Redis's allocator rounds them) with each Redis
/// node's maxmemory (a Redis Cluster's: each master's), or, for a server on this machine without
/// one, with this machine's available memory less what kvtier keeps itself (`inflight_bytes` and,
/// on the GPU, the pinned host tier), and
/// with each file node's free disk. Throws config_error with the numbers and the largest capacity
/// that fits when it cannot; writes warnings (a maxmemory-policy other than noeviction, a remote
/// server without maxmemory) to `warn`.
void check_storage_room(const deployment_plan& plan, uint64_t inflight_bytes,
                        const machine_memory& machine, std::ostream& warn);

}  // namespace kvtier
