#include "sim/full/request_count_checks.hpp"

#include <set>

namespace kvtier {

std::vector<std::string> request_count_problems(const full_result& r) {
  std::vector<std::string> out;
  if (!r.drained)
    return out;
  const std::vector<request_record>& records = r.scheduler.requests;
  if (records.size() != r.front_end.read)
    out.push_back("requests: " + std::to_string(r.front_end.read) + " read, but "
                  + std::to_string(records.size()) + " recorded");
  std::set<request_id> seen;
  for (const request_record& q : records) {
    if (!seen.insert(q.req).second)
      out.push_back("requests: request " + std::to_string(q.req) + " recorded twice");
    int ends = (q.finish_ns >= 0) + q.rejected + q.failed;
    if (ends > 1)
      out.push_back("requests: request " + std::to_string(q.req)
                    + " ended more than once (finished, rejected, failed)");
  }
  return out;
}

}  // namespace kvtier
