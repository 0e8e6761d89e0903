#pragma once

// A cluster's figures: every instance's reports summed (model/messages/report_sum.hpp), each
// invariant message named by its instance, and, for prefill/decode, one record per request.

#include "sim/report/full_result.hpp"

namespace kvtier {

/// Sets `r`'s scheduler, controller and engine reports to the sums of `r.instances`'; requests
/// in id order (joined across prefill and decode when `r.disaggregated`).
void sum_instances(full_result& r);

}  // namespace kvtier
