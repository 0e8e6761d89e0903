#pragma once

// The compute.* config keys: the step cost model of a timed replay
// (model/scheduler/cost_model.hpp). Read by instance_settings.cpp.
// Each key is a named constant, so a misspelled key is a compile error; its type, range and
// meaning are its row in compute_keys.cpp.

#include <vector>

#include "runtime/config/option_spec.hpp"

namespace kvtier {

namespace keys::compute {

inline constexpr number_key step_overhead_us{"compute.step_overhead_us"};
inline constexpr number_key prefill_token_us{"compute.prefill_token_us"};
inline constexpr number_key prefill_attention_ns{"compute.prefill_attention_ns"};
inline constexpr number_key decode_token_us{"compute.decode_token_us"};
inline constexpr number_key decode_context_ns{"compute.decode_context_ns"};
inline constexpr text_key model{"compute.model"};
inline constexpr text_key decode_kv_reads{"compute.decode_kv_reads"};
inline constexpr number_key hbm_utilization{"compute.hbm_utilization"};
inline constexpr number_key runtime_reserve_gib{"compute.runtime_reserve_gib"};

}  // namespace keys::compute

/// The compute.* rows of the options table, in the order `kvtier config` lists them.
std::vector<option_spec> compute_key_specs();

}  // namespace kvtier
