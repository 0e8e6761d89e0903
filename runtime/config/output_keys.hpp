#pragma once

// The output.* config keys: optional outputs of a replay beyond summary.json and requests.csv
// (docs/outputs.md). Read by sim/driver/replay_driver.cpp.
// Each key is a named constant, so a misspelled key is a compile error; its type, range and
// meaning are its row in output_keys.cpp.

#include <vector>

#include "runtime/config/option_spec.hpp"

namespace kvtier {

namespace keys::output {

inline constexpr boolean_key timeseries{"output.timeseries"};

}  // namespace keys::output

/// The output.* rows of the options table, in the order `kvtier config` lists them.
std::vector<option_spec> output_key_specs();

}  // namespace kvtier
