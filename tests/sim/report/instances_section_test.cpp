// An instance's hit ratio counts what the summary's does (sim/report/request_tally.cpp): hits at
// a request's first admission on its first pass, over its prompt.

#include <catch2/catch.hpp>

#include "sim/report/summary_sections.hpp"

using namespace kvtier;

namespace {

request_record finished(uint64_t req, uint32_t input, uint64_t first_device_hits,
                        uint64_t last_device_hits, uint32_t attempt) {
  request_record q;
  q.req = req;
  q.arrival_ns = 0;
  q.first_token_ns = 10;
  q.finish_ns = 20;
  q.input_tokens = input;
  q.output_tokens = 1;
  at(q.first_hit_tokens, tier::device) = first_device_hits;
  at(q.hit_tokens, tier::device) = last_device_hits;
  q.attempt = attempt;
  return q;
}

}  // namespace

TEST_CASE("instances: hit ratio leaves readmissions and passes after a drop out",
          "[report][pd]") {
  full_result r;
  r.disaggregated = true;
  r.front_end.per_instance = {2};
  instance_result p;
  p.name = "prefill-0";
  p.role = pd_role::prefill;
  // Request 0: 100 prompt tokens, 10 hit at its first admission, 60 at a readmission (its own
  // blocks). Its second pass, after a decode instance dropped it, prompt and output as its new
  // prompt, finds 200 of its 300 tokens: what the first pass computed.
  p.scheduler.requests.push_back(finished(0, 100, 10, 60, 0));
  p.scheduler.requests.push_back(finished(0, 300, 200, 200, 1));
  r.instances.push_back(p);
  nlohmann::json s = instances_section(r);
  REQUIRE(s.size() == 1);
  CHECK(s[0]["hit_ratio_tokens"]["device"].get<double>() == Approx(0.1));
  CHECK(s[0]["requests"]["finished"] == 2);  // both passes ran here
}
