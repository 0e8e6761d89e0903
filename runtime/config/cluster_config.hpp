#pragma once

// The deployment a timed replay models: `cluster.instances`, groups of instances of one role
// with their own overrides of cache.*, scheduler.*, compute.* and links.* keys, all sharing the
// storage nodes. The default is one mixed instance.

#include <string>
#include <vector>

#include "model/pd/pd_options.hpp"
#include "runtime/config/options.hpp"

namespace kvtier {

struct instance_spec {
  std::string name;   ///< role-index, e.g. mixed-0
  pd_role role = pd_role::mixed;
  config settings;    ///< the run's config with the group's overrides laid over it
};

/// Every instance of `c`'s cluster, in order; throws config_error naming the item and field.
std::vector<instance_spec> resolve_cluster(const config& c);

/// True when `c` describes one mixed instance with no overrides (today's single instance).
bool single_instance(const config& c);

}  // namespace kvtier
