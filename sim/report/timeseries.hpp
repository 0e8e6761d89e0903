#pragma once

// timeseries.csv (output.timeseries; schema: docs/outputs.md): one row per second of a full-mode
// replay's clock, from the run's reports and the tier occupancy sampled during it. Derived after
// the run from what the actors record anyway, so it costs the replay nothing and is as
// deterministic as the replay.

#include <ostream>
#include <vector>

#include "core/tier.hpp"
#include "sim/report/full_result.hpp"
#include "sim/report/tier_occupancy.hpp"

namespace kvtier {

/// Writes the series of `r`, with the ready blocks per tier `occupancy` sampled during it.
void write_timeseries(std::ostream& out, const full_result& r,
                      const tier_occupancy_sampler& occupancy);

}  // namespace kvtier
