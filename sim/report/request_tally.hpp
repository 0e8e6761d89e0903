#pragma once

// One pass over a full replay's request records, giving what summary.json's request figures are
// made of: counts and tokens of the finished and rejected requests, their hits per tier, and
// their latencies (docs/outputs.md, `--mode full`).

#include <cstdint>
#include <vector>

#include "actors/messages.hpp"

namespace kvtier {

struct request_tally {
  uint64_t finished = 0;
  uint64_t blocks = 0;  ///< prompt blocks of the finished requests
  uint64_t input = 0;
  uint64_t output = 0;
  uint64_t rejected_input = 0;
  uint64_t rejected_output = 0;
  /// Hits at the first admission (what the cache saved), per tier and in all.
  per_tier<uint64_t> tier_blocks{};
  per_tier<uint64_t> tier_tokens{};
  uint64_t hit_blocks = 0;
  uint64_t hit_tokens = 0;
  /// Preempted requests, and the hits on their own blocks at their last admission.
  uint64_t readmitted = 0;
  uint64_t readmission_blocks = 0;
  uint64_t readmission_tokens = 0;
  int64_t first_arrival_ns = INT64_MAX;
  int64_t last_finish_ns = 0;
  /// Milliseconds, one entry per finished request (tpot: those with more than one output token).
  std::vector<double> ttft, tpot, e2e, queue;
  /// The same split by whether the request was preempted: what preemption costs those it hits.
  std::vector<double> preempted_ttft, preempted_e2e, other_ttft, other_e2e;

  /// First arrival to last finish, seconds; 0 when nothing finished.
  double makespan_s() const;
};

request_tally tally_requests(const std::vector<request_record>& requests);

}  // namespace kvtier
