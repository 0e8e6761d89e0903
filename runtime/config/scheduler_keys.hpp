#pragma once

// The scheduler.* config keys: the timed replay's scheduler (batch limits, the output reserve,
// preemption; docs/preemption.md). Read by instance_settings.cpp.
// Each key is a named constant, so a misspelled key is a compile error; its type, range and
// meaning are its row in scheduler_keys.cpp.

#include <vector>

#include "runtime/config/option_spec.hpp"

namespace kvtier {

namespace keys::scheduler {

inline constexpr integer_key max_num_seqs{"scheduler.max_num_seqs"};
inline constexpr integer_key token_budget{"scheduler.token_budget"};
inline constexpr number_key reserve_output_blocks{"scheduler.reserve_output_blocks"};
inline constexpr number_key reserve_decay{"scheduler.reserve_decay"};
inline constexpr integer_key reserve_min{"scheduler.reserve_min"};
inline constexpr integer_key probe_limit{"scheduler.probe_limit"};
inline constexpr text_key preemption{"scheduler.preemption"};

}  // namespace keys::scheduler

/// The scheduler.* rows of the options table, in the order `kvtier config` lists them.
std::vector<option_spec> scheduler_key_specs();

}  // namespace kvtier
