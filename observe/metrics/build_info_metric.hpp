#pragma once

// `kvtier_build_info` (docs/metrics.md): a gauge of 1 whose labels name the build, the
// Prometheus way of exporting a version, so a dashboard can tell which code served a figure.

#include "core/build_info.hpp"
#include "observe/metrics/metrics_registry.hpp"

namespace kvtier {

void add_build_info_metric(metrics_registry& r, const build_info& b = this_build());

}  // namespace kvtier
