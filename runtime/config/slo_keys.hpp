#pragma once

// The slo.* config keys: the service-level objective `kvtier study slo` searches the sustained
// load under (docs/sweep.md, "The SLO capacity study"). A replay reads none of them; they are
// keys so that `--set slo.ttft_p99_ms=...` is checked like any other. Each key's type, range and
// meaning are its row in slo_keys.cpp.

#include <vector>

#include "runtime/config/option_spec.hpp"

namespace kvtier {

namespace keys::slo {

inline constexpr number_key ttft_p99_ms{"slo.ttft_p99_ms"};
inline constexpr number_key tpot_p99_ms{"slo.tpot_p99_ms"};
inline constexpr number_key precision{"slo.precision"};

}  // namespace keys::slo

/// The slo.* rows of the options table, in the order `kvtier config` lists them.
std::vector<option_spec> slo_key_specs();

}  // namespace kvtier
