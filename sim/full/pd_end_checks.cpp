#include "sim/full/pd_end_checks.hpp"

#include <set>
#include <utility>

namespace kvtier {

std::vector<std::string> pd_end_problems(const full_result& r) {
  std::vector<std::string> out;
  if (!r.disaggregated || !r.drained)
    return out;
  const front_end_report& f = r.front_end;
  if (f.pushed != f.finished + f.rejected + f.failed)
    out.push_back("pd: " + std::to_string(f.pushed) + " requests pushed, but "
                  + std::to_string(f.finished) + " finished + " + std::to_string(f.rejected)
                  + " rejected + " + std::to_string(f.failed) + " failed");
  uint64_t drops = 0, written = 0;
  for (const instance_result& x : r.instances) {
    drops += x.scheduler.decode_drops;
    written += x.scheduler.decode_drop_writes;
    std::set<std::pair<request_id, uint32_t>> passes;
    for (const request_record& q : x.scheduler.requests)
      if (!passes.insert({q.req, q.attempt}).second)
        out.push_back("pd: " + x.name + " recorded pass " + std::to_string(q.attempt)
                      + " of request " + std::to_string(q.req) + " twice");
  }
  if (drops != f.rerouted)
    out.push_back("pd: decode instances dropped " + std::to_string(drops)
                  + " requests, but the front end routed " + std::to_string(f.rerouted) + " again");
  if (written != f.rerouted_saved)
    out.push_back("pd: decode instances wrote " + std::to_string(written)
                  + " dropped requests to storage, but the front end saw "
                  + std::to_string(f.rerouted_saved));
  uint64_t ended = 0;
  for (const request_record& q : r.scheduler.requests) {
    if (q.finish_ns >= 0 && q.failed)
      out.push_back("pd: request " + std::to_string(q.req) + " both finished and failed");
    ended += q.finish_ns >= 0;
  }
  if (ended != f.finished)
    out.push_back("pd: " + std::to_string(ended) + " requests have a finish, but the front end "
                  "counted " + std::to_string(f.finished) + " finished");
  return out;
}

}  // namespace kvtier
