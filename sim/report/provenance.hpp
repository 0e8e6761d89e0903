#pragma once

// The build's identity as the JSON outputs carry it: summary.json's and a sweep plan's `kvtier`
// object (docs/outputs.md, "Provenance").

#include <nlohmann/json.hpp>

#include "core/build_info.hpp"

namespace kvtier {

nlohmann::json build_info_json(const build_info& b = this_build());

}  // namespace kvtier
