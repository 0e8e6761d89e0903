#pragma once

// The config an engine and `kvtier serve` must share (docs/protocol.md, "hello"): an engine that
// plans with other tier sizes, another storage pool or another preemption mode than the server's
// would run with decisions that match neither config. An engine sends these values in hello's
// `config`; the server refuses the first that differs from its own, naming the key.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/config/options.hpp"
#include "runtime/config/replay_config.hpp"

namespace kvtier::serve {

/// Key and value (JSON text), in the config table's order.
using config_values = std::vector<std::pair<std::string, std::string>>;

/// Every key of model.*, cache.*, storage.* and links.* and scheduler.preemption as JSON text,
/// the tier sizes as the blocks they resolve to (cache.device_blocks, cache.host_blocks,
/// storage.capacity_blocks), whichever of their keys set them.
config_values shared_config(const config& cfg, const replay_config& rc);

/// Why an engine's values are refused: a key the server does not compare (`known` false) or
/// one whose value differs.
struct config_difference {
  bool known = true;
  std::string key, theirs, ours;
};

/// The first of `theirs` that is not in `ours` or differs from it; nullopt: all shared.
std::optional<config_difference> first_difference(const config_values& theirs,
                                                  const config_values& ours);

}  // namespace kvtier::serve
