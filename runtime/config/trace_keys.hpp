#pragma once

// The trace.* config keys: how traces are read (the time scale, and the limits on what one line,
// document or request may hold). Read by deployment_plan.cpp; the limits by sim/driver/ and serve/.
// Each key is a named constant, so a misspelled key is a compile error; its type, range and
// meaning are its row in trace_keys.cpp.

#include <vector>

#include "runtime/config/option_spec.hpp"

namespace kvtier {

namespace keys::trace {

inline constexpr number_key time_scale{"trace.time_scale"};
inline constexpr integer_key max_line_bytes{"trace.max_line_bytes"};
inline constexpr integer_key max_document_bytes{"trace.max_document_bytes"};
inline constexpr integer_key max_blocks_per_request{"trace.max_blocks_per_request"};
inline constexpr number_key sample_fraction{"trace.sample_fraction"};
inline constexpr number_key arrival_jitter_s{"trace.arrival_jitter_s"};
inline constexpr number_key session_shift_s{"trace.session_shift_s"};
inline constexpr integer_key session_copies{"trace.session_copies"};

}  // namespace keys::trace

/// The trace.* rows of the options table, in the order `kvtier config` lists them.
std::vector<option_spec> trace_key_specs();

}  // namespace kvtier
