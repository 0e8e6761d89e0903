#pragma once

// A prefill/decode run's request records, joined: one record per request from its prefill
// record and its decode record (docs/cluster.md).

#include <vector>

#include "sim/report/full_result.hpp"

namespace kvtier {

/// One record per request, in id order; requests that never reached a prefill instance come
/// from the front end's. A request a decode instance dropped has a record per pass on each side
/// (records come in pass order): the first prefill pass gives its arrival, admission, hits and
/// first token; the last decode pass its finish; work and preemptions add up over every pass.
std::vector<request_record> join_handoffs(const std::vector<instance_result>& instances,
                                          const front_end_report& front);

}  // namespace kvtier
