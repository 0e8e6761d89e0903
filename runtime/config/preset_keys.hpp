#pragma once

// The preset.* config keys: a named model or GPU whose figures (runtime/config/presets.cpp,
// sourced in docs/models.md) set model.* or gpu.* and compute.model=roofline at once. A key set
// explicitly, by a config file or --set, before or after the preset, keeps its value.
// Each key is a named constant, so a misspelled key is a compile error; its type, range and
// meaning are its row in preset_keys.cpp.

#include <vector>

#include "runtime/config/option_spec.hpp"

namespace kvtier {

namespace keys::preset {

inline constexpr text_key model{"preset.model"};
inline constexpr text_key gpu{"preset.gpu"};

}  // namespace keys::preset

/// The preset.* rows of the options table, in the order `kvtier config` lists them.
std::vector<option_spec> preset_key_specs();

}  // namespace kvtier
