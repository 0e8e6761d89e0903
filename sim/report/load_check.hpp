#pragma once

// What shaped a timed replay's figures besides the cache (docs/outputs.md, "--mode full", its
// load.* rows), each named with advice that fits its cause:
// - overloaded: arrivals outpaced the instance, so the queue grew through the run and latency,
//   even hit ratios, measure queueing rather than caching. The test: requests in arrival order,
//   split in quarters; the median queue wait (arrival to first admission) of the last quarter
//   exceeds the first quarter's by more than 1 s and grows by more than 5% of the time between
//   them (a stable queue's wait does not trend; an overloaded one's grows by (arrival rate /
//   service rate - 1) seconds per second).
// - clock lag (wall clock): steps ran late because the machine did not keep up with the clock's
//   pace, for more than 1% of the run's time; the figures then measure this machine.
// - L3 backpressure: transfers to and from storage waited for room among the bytes in flight
//   (storage.max_inflight_bytes) for at least 5% of the run's time, summed over transfers: the
//   storage backend did not keep up.
// An overloaded run's cause is the first of clock lag, L3 backpressure and arrivals that holds,
// so that advice to stretch the trace (trace.time_scale) is given only where arrivals alone
// explain the queue.

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/messages.hpp"

namespace kvtier {

struct load_inputs {
  double virtual_s = 0;      ///< the run's length on its clock
  double lag_s = 0;          ///< steps' lateness summed (wall clock only)
  double store_wait_s = 0;   ///< waits for room among the bytes in flight to storage, summed
  double inflight_peak_bytes = 0;
  double time_scale = 1;     ///< trace.time_scale
};

/// summary.json's "load" object: overloaded, queue_growth, queue_wait_s_by_quarter, clock_lag,
/// clock_lag_share, l3_backpressure, l3_wait_share, cause and advice.
nlohmann::json load_check(const std::vector<request_record>& requests, const load_inputs& in);

/// The lines the terminal summary prints for `load` (empty when nothing shaped the run).
std::string load_text(const nlohmann::json& load);

}  // namespace kvtier
