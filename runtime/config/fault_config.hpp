#pragma once

// The seeded faults (faults.*) as the storage actor takes them.

#include <cstdint>

#include "model/storage/fault_plan.hpp"
#include "runtime/config/options.hpp"

namespace kvtier {

/// The faults.* keys with `seed`; throws config_error for a node beyond storage.nodes, or for
/// faults without a storage tier to strike.
fault_options resolve_faults(const config& c, uint64_t seed, uint32_t storage_nodes,
                             uint64_t storage_blocks);

}  // namespace kvtier
