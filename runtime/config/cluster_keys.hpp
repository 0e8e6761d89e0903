#pragma once

// The cluster.* config keys: the deployment, the instances sharing the storage pool
// (docs/cluster.md). Read by cluster_config.cpp.
// Each key is a named constant, so a misspelled key is a compile error; its type, range and
// meaning are its row in cluster_keys.cpp.

#include <vector>

#include "runtime/config/option_spec.hpp"

namespace kvtier {

namespace keys::cluster {

inline constexpr list_key instances{"cluster.instances"};

}  // namespace keys::cluster

/// The cluster.* rows of the options table, in the order `kvtier config` lists them.
std::vector<option_spec> cluster_key_specs();

}  // namespace kvtier
