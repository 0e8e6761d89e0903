#pragma once

// Bounds that keep a timed replay's virtual time far from overflow (core/time_math.hpp).
// Every config key has its own range, but products of in-range values can still be absurd
// (1024 layers of 1024 heads of dimension 4096 in 32768-token blocks is 2^49 bytes a block); the
// derived quantities are checked here, and the error names the keys they come from.

#include <string>

#include "actors/instance.hpp"
#include "actors/storage/storage.hpp"
#include "runtime/config/options.hpp"

namespace kvtier {

/// Largest block (K and V of every layer): 1 TiB.
constexpr double block_bytes_limit = 1099511627776.0;
/// Largest device or host tier: 1 PiB.
constexpr double tier_bytes_limit = 1125899906842624.0;

/// Throws config_error when an instance's block, a tier, the slowest transfer of a whole tier
/// over a link (to the shared `storage` too), or the longest possible step exceeds its limit.
void check_time_limits(const instance_config& instance, const storage_options& storage);

/// `x` to 4 significant figures, and `ns` as days: how the limits' errors write figures.
std::string time_limit_figure(double x);
std::string time_limit_days(double ns);

}  // namespace kvtier
