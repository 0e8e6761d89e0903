#pragma once

// The faults.* config keys: the seeded storage faults of a full replay (docs/faults.md). Read by
// fault_config.cpp.
// Each key is a named constant, so a misspelled key is a compile error; its type, range and
// meaning are its row in faults_keys.cpp.

#include <vector>

#include "runtime/config/option_spec.hpp"

namespace kvtier {

namespace keys::faults {

inline constexpr number_key node_loss_at_s{"faults.node_loss_at_s"};
inline constexpr integer_key node_loss_node{"faults.node_loss_node"};
inline constexpr number_key node_losses_per_hour{"faults.node_losses_per_hour"};
inline constexpr number_key down_s{"faults.down_s"};
inline constexpr number_key slow_link_at_s{"faults.slow_link_at_s"};
inline constexpr integer_key slow_link_node{"faults.slow_link_node"};
inline constexpr number_key slow_links_per_hour{"faults.slow_links_per_hour"};
inline constexpr number_key slow_link_s{"faults.slow_link_s"};
inline constexpr number_key slow_link_factor{"faults.slow_link_factor"};
inline constexpr number_key get_fail_probability{"faults.get_fail_probability"};
inline constexpr number_key put_fail_probability{"faults.put_fail_probability"};

}  // namespace keys::faults

/// The faults.* rows of the options table, in the order `kvtier config` lists them.
std::vector<option_spec> faults_key_specs();

}  // namespace kvtier
