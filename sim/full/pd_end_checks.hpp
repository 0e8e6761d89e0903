#pragma once

// What a drained prefill/decode replay must hold at its end, however often decode instances
// dropped requests (docs/fastdeploy.md §4): every request pushed once and ended once, every drop
// routed again, and no pass of a request recorded twice on an instance (a double finish). Each
// broken rule is one message; a sound run gives none (docs/preemption.md, "Decode instances").

#include <string>
#include <vector>

#include "sim/report/full_result.hpp"

namespace kvtier {

std::vector<std::string> pd_end_problems(const full_result& r);

}  // namespace kvtier
