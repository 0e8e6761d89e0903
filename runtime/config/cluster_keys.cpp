#include "runtime/config/cluster_keys.hpp"

namespace kvtier {

std::vector<option_spec> cluster_key_specs() {
  return {
    {keys::cluster::instances, 0, 0, {}, false,
     "the instances sharing the storage pool: a list of {\"role\": \"mixed\", \"count\": n, "
     "\"overrides\": {key: value}}, overrides of cache.*, scheduler.*, compute.* and links.* keys "
     "for that group (docs/cluster.md)"},
  };
}

}  // namespace kvtier
