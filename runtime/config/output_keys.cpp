#include "runtime/config/output_keys.hpp"

namespace kvtier {

std::vector<option_spec> output_key_specs() {
  return {
    {keys::output::timeseries, 0, 0, {}, false,
     "full mode: also write timeseries.csv beside summary.json, one row per second of the "
     "replay's clock (waiting and running requests, ready blocks per tier, link busy fractions, "
     "hits and computed tokens; docs/outputs.md)"},
  };
}

}  // namespace kvtier
