#include "sim/full/pd_join.hpp"

#include <algorithm>
#include <map>

namespace kvtier {

namespace {

using joined_records = std::map<request_id, request_record>;

// Each request's first prefill pass, with the work and preemptions of its later ones.
joined_records prefill_passes(const std::vector<instance_result>& instances) {
  joined_records joined;
  for (const instance_result& x : instances)
    if (x.role == pd_role::prefill)
      for (const request_record& q : x.scheduler.requests)
        if (q.attempt == 0)
          joined[q.req] = q;
  for (const instance_result& x : instances)
    if (x.role == pd_role::prefill)
      for (const request_record& q : x.scheduler.requests) {
        auto it = joined.find(q.req);
        if (q.attempt == 0 || it == joined.end())
          continue;
        it->second.computed_tokens += q.computed_tokens;
        it->second.recomputed_tokens += q.recomputed_tokens;
        it->second.late_hit_tokens += q.late_hit_tokens;
        it->second.preemptions += q.preemptions;
      }
  return joined;
}

// The decode passes: the first gives the output and first token, the last the finish.
void add_decode_passes(const std::vector<instance_result>& instances, joined_records& joined) {
  std::map<request_id, uint32_t> last_pass;
  for (const instance_result& x : instances)
    if (x.role == pd_role::decode)
      for (const request_record& q : x.scheduler.requests)
        last_pass[q.req] = std::max(last_pass[q.req], q.attempt);
  for (const instance_result& x : instances) {
    if (x.role != pd_role::decode)
      continue;
    for (const request_record& q : x.scheduler.requests) {
      auto it = joined.find(q.req);
      if (it == joined.end())
        continue;  // preallocated, then rejected by the prefill instance
      request_record& r = it->second;
      if (q.attempt == 0) {
        r.output_tokens = q.output_tokens;
        r.first_token_ns = q.first_token_ns;
      }
      if (q.attempt == last_pass[q.req]) {
        r.finish_ns = q.finish_ns;
        r.failed = q.failed;
      }
      r.preemptions += q.preemptions;
      r.computed_tokens += q.computed_tokens;  // a failed handoff D recomputed
      r.recomputed_tokens += q.recomputed_tokens;
      r.late_hit_tokens += q.late_hit_tokens;
    }
  }
}

}  // namespace

std::vector<request_record> join_handoffs(const std::vector<instance_result>& instances,
                                          const front_end_report& front) {
  joined_records joined = prefill_passes(instances);
  add_decode_passes(instances, joined);
  for (const request_record& q : front.never_prefilled) {
    auto it = joined.find(q.req);
    if (it == joined.end()) {
      joined[q.req] = q;
      continue;
    }
    it->second.finish_ns = -1;  // its next pass never reached a prefill instance
    it->second.rejected = q.rejected;
    it->second.failed = q.failed;
  }
  std::vector<request_record> out;
  out.reserve(joined.size());
  for (auto& [id, r] : joined)
    out.push_back(std::move(r));
  return out;
}

}  // namespace kvtier
