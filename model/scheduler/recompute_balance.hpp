#pragma once

// The token balance a replay's requests must keep at its end (docs/design.md, "Hit ratio"):
// every prompt token is a hit at the request's first admission, computed, or found cached by a
// re-admission before the request reached it, and any token computed more than once is counted
// as recomputed, once per extra time. Per finished request of an instance that prefills and
// decodes itself:
//   first_hit_tokens + computed_tokens + late_hit_tokens = input_tokens + recomputed_tokens,
// and the requests' recomputed tokens add up to the scheduler's `recomputed_tokens`. A
// disaggregated run's records join two instances' passes, which the identity does not cover.

#include <cstdint>
#include <string>
#include <vector>

#include "model/messages/reports.hpp"

namespace kvtier {

/// One message per broken rule (the first few requests that break it), none for a sound run.
std::vector<std::string> recompute_balance_problems(const std::vector<request_record>& records,
                                                    uint64_t recomputed_tokens);

}  // namespace kvtier
