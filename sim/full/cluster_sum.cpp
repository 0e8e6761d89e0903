#include "sim/full/cluster_sum.hpp"

#include <algorithm>

#include "model/messages/report_sum.hpp"
#include "sim/full/pd_join.hpp"

namespace kvtier {

void sum_instances(full_result& r) {
  r.scheduler = {};
  r.scheduler.drained = true;  // until an instance was not
  r.controller = {};
  r.engine = {};
  for (const instance_result& x : r.instances) {
    size_t named = r.controller.invariant_messages.size();
    r.scheduler += x.scheduler;
    r.controller += x.controller;
    r.engine += x.engine;
    for (size_t i = named; i < r.controller.invariant_messages.size(); ++i)
      r.controller.invariant_messages[i] = x.name + ": " + r.controller.invariant_messages[i];
  }
  std::sort(r.scheduler.requests.begin(), r.scheduler.requests.end(),
            [](const request_record& a, const request_record& b) {
              return a.req != b.req ? a.req < b.req : a.attempt < b.attempt;
            });
  if (r.disaggregated)
    r.scheduler.requests = join_handoffs(r.instances, r.front_end);
}

}  // namespace kvtier
