#pragma once

// The pd.* config keys: prefill/decode disaggregation, the KV handoff and its failures
// (docs/cluster.md). Read by instance_settings.cpp.
// Each key is a named constant, so a misspelled key is a compile error; its type, range and
// meaning are its row in pd_keys.cpp.

#include <vector>

#include "runtime/config/option_spec.hpp"

namespace kvtier {

namespace keys::pd {

inline constexpr text_key transfer{"pd.transfer"};
inline constexpr number_key wait_decode_resource_s{"pd.wait_decode_resource_s"};
inline constexpr boolean_key retry_decode_resource{"pd.retry_decode_resource"};
inline constexpr number_key retry_interval_ms{"pd.retry_interval_ms"};
inline constexpr text_key on_handoff_failure{"pd.on_handoff_failure"};
inline constexpr number_key failure_rate{"pd.failure_rate"};
inline constexpr integer_key decode_extra_blocks{"pd.decode_extra_blocks"};

}  // namespace keys::pd

/// The pd.* rows of the options table, in the order `kvtier config` lists them.
std::vector<option_spec> pd_key_specs();

}  // namespace kvtier
