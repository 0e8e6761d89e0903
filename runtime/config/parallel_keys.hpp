#pragma once

// The parallel.* config keys: how the ranks of one instance split the model (KV heads and
// compute over parallel.tp, layers over parallel.pp; core/model_spec.hpp). Read by
// replay_config.cpp and compute_config.cpp.
// Each key is a named constant, so a misspelled key is a compile error; its type, range and
// meaning are its row in parallel_keys.cpp.

#include <vector>

#include "runtime/config/option_spec.hpp"

namespace kvtier {

namespace keys::parallel {

inline constexpr integer_key tp{"parallel.tp"};
inline constexpr integer_key pp{"parallel.pp"};
inline constexpr integer_key pp_microbatches{"parallel.pp_microbatches"};

}  // namespace keys::parallel

/// The parallel.* rows of the options table, in the order `kvtier config` lists them.
std::vector<option_spec> parallel_key_specs();

}  // namespace kvtier
