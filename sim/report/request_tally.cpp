#include "sim/report/request_tally.hpp"

#include <algorithm>

namespace kvtier {

namespace {

void add_finished(request_tally& t, const request_record& x) {
  ++t.finished;
  t.last_finish_ns = std::max(t.last_finish_ns, x.finish_ns);
  t.blocks += x.blocks;
  t.input += x.input_tokens;
  t.output += x.output_tokens;
  // Hits found when the request was first admitted: what the cache saved it. After a
  // preemption its last admission also finds its own blocks, computed before it was preempted;
  // those are reported apart, as readmission hits.
  for (tier k : all_tiers) {
    at(t.tier_blocks, k) += at(x.first_hit_blocks, k);
    at(t.tier_tokens, k) += at(x.first_hit_tokens, k);
    t.hit_blocks += at(x.first_hit_blocks, k);
    t.hit_tokens += at(x.first_hit_tokens, k);
  }
  if (x.preemptions > 0) {
    ++t.readmitted;
    for (tier k : all_tiers) {
      t.readmission_blocks += at(x.hit_blocks, k);
      t.readmission_tokens += at(x.hit_tokens, k);
    }
  }
  t.ttft.push_back(static_cast<double>(x.first_token_ns - x.arrival_ns) / 1e6);
  t.e2e.push_back(static_cast<double>(x.finish_ns - x.arrival_ns) / 1e6);
  (x.preemptions > 0 ? t.preempted_ttft : t.other_ttft).push_back(t.ttft.back());
  (x.preemptions > 0 ? t.preempted_e2e : t.other_e2e).push_back(t.e2e.back());
  t.queue.push_back(static_cast<double>(x.admitted_ns - x.arrival_ns) / 1e6);
  if (x.output_tokens > 1)
    t.tpot.push_back(static_cast<double>(x.finish_ns - x.first_token_ns) / 1e6
                     / static_cast<double>(x.output_tokens - 1));
}

}  // namespace

double request_tally::makespan_s() const {
  return finished ? static_cast<double>(last_finish_ns - first_arrival_ns) / 1e9 : 0;
}

request_tally tally_requests(const std::vector<request_record>& requests) {
  request_tally t;
  for (const request_record& x : requests) {
    t.first_arrival_ns = std::min(t.first_arrival_ns, x.arrival_ns);
    if (x.rejected) {
      t.rejected_input += x.input_tokens;
      t.rejected_output += x.output_tokens;
    }
    if (x.finish_ns >= 0)
      add_finished(t, x);
  }
  return t;
}

}  // namespace kvtier
