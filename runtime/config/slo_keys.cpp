#include "runtime/config/slo_keys.hpp"

namespace kvtier {

std::vector<option_spec> slo_key_specs() {
  return {
    {keys::slo::ttft_p99_ms, 1e-3, 1e9, {}, false,
     "SLO study: the highest TTFT p99 (ms) a sustained load may give"},
    {keys::slo::tpot_p99_ms, 1e-3, 1e9, {}, false,
     "SLO study: the highest TPOT p99 (ms) a sustained load may give"},
    {keys::slo::precision, 1e-3, 1, {}, false,
     "SLO study: the search stops once the lowest failing rate is within this fraction above "
     "the highest sustained one (0.05: 5%)"},
  };
}

}  // namespace kvtier
