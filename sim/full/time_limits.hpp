#pragma once

// Bounds that keep a timed replay's virtual time far from overflow (core/time_math.hpp).
// Every config key has its own range, but products of in-range values can still be absurd
// (1024 layers of 1024 heads of dimension 4096 in 32768-token blocks is 2^49 bytes a block); the
// derived quantities are checked here, and the error names the keys they come from.

#include <string>

#include "sim/full/full_replay.hpp"
#include "sim/full/timed_config.hpp"
#include "sim/trace/trace_reader.hpp"

namespace kvtier {

/// Largest block (K and V of every layer): 1 TiB.
constexpr double block_bytes_limit = 1099511627776.0;
/// Largest device or host tier: 1 PiB.
constexpr double tier_bytes_limit = 1125899906842624.0;

/// Throws config_error when a block, a tier, the slowest transfer of a whole tier over a link, or
/// the longest possible step exceeds its limit.
void check_time_limits(const timed_config& t);

/// Throws trace_error (file `path` of `format`, the request's line and field) when the request's
/// arrival or think time, times trace.time_scale, is beyond input_time_limit_ns.
void check_request_times(const trace_request& r, double time_scale, const std::string& path,
                         trace_format format);

/// Throws config_error when a replay's virtual time reached time_limit_ns (its figures would be
/// capped, not real).
void check_virtual_time(const full_result& r);

}  // namespace kvtier
