#pragma once

// A replay's own time checks, beside the config's (runtime/config/time_limits.hpp): each
// request's times as read from its trace, and the virtual time a replay reached.

#include <string>

#include "sim/report/full_result.hpp"
#include "sim/trace/trace_reader.hpp"

namespace kvtier {

/// Throws trace_error (file `path` of `format`, the request's line and field) when the request's
/// arrival or think time, times trace.time_scale, is beyond input_time_limit_ns.
void check_request_times(const trace_request& r, double time_scale, const std::string& path,
                         trace_format format);

/// Throws config_error when a replay's virtual time reached time_limit_ns (its figures would be
/// capped, not real).
void check_virtual_time(const full_result& r);

}  // namespace kvtier
