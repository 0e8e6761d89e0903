#pragma once

// The router.* config keys: which instance a request goes to (docs/cluster.md). Read by
// instance_settings.cpp.
// Each key is a named constant, so a misspelled key is a compile error; its type, range and
// meaning are its row in router_keys.cpp.

#include <vector>

#include "runtime/config/option_spec.hpp"

namespace kvtier {

namespace keys::router {

inline constexpr text_key policy{"router.policy"};
inline constexpr boolean_key session_affinity{"router.session_affinity"};
inline constexpr number_key load_weight{"router.load_weight"};

}  // namespace keys::router

/// The router.* rows of the options table, in the order `kvtier config` lists them.
std::vector<option_spec> router_key_specs();

}  // namespace kvtier
