#pragma once

// Whether a timed replay was overloaded: arrivals outpaced the instance, so the queue grew
// through the run and latency and even hit ratios measure queueing rather than caching. The
// test: requests in arrival order, split in quarters; the median queue wait (arrival to first
// admission) of the last quarter exceeds the first quarter's by more than 1 s and grows by more
// than 5% of the time between them (a stable queue's wait does not trend; an overloaded one's
// grows by (arrival rate / service rate - 1) seconds per second).

#include <vector>

#include <nlohmann/json.hpp>

#include "actors/messages.hpp"

namespace kvtier {

/// summary.json's "load" object: overloaded, queue_growth, queue_wait_s_by_quarter.
nlohmann::json load_check(const std::vector<request_record>& requests);

}  // namespace kvtier
