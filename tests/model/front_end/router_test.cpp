// The router's choices and the cache-aware cost, worked by hand.

#include <catch2/catch.hpp>

#include "model/front_end/router.hpp"

using namespace kvtier;

namespace {

trace_request prompt(uint32_t tokens, uint64_t session = 0, uint32_t turn = 0) {
  trace_request r;
  r.input_tokens = tokens;
  r.session = session;
  r.turn = turn;
  return r;
}

prefix_hit hit(uint64_t device_tokens, uint64_t host_tokens) {
  return {0, 0, device_tokens, host_tokens};
}

}  // namespace

TEST_CASE("router: round robin takes instances in turn", "[router]") {
  router r({route_policy::round_robin, false, 1}, 3);
  std::vector<size_t> got;
  for (int i = 0; i < 5; ++i) {
    got.push_back(r.pick(prompt(10), {}));
    r.pushed(got.back(), prompt(10));
  }
  CHECK(got == std::vector<size_t>{0, 1, 2, 0, 1});
}

TEST_CASE("router: least loaded takes the fewest requests in flight, ties to the lower index",
          "[router]") {
  router r({route_policy::least_loaded, false, 1}, 3);
  r.pushed(0, prompt(10));
  r.pushed(0, prompt(10));
  r.pushed(1, prompt(10));
  CHECK(r.pick(prompt(10), {}) == 2);
  r.pushed(2, prompt(10));
  CHECK(r.pick(prompt(10), {}) == 1);  // 2, 1, 1 in flight: the lower of the two
  r.answered(0, 10);
  r.answered(0, 10);
  CHECK(r.pick(prompt(10), {}) == 0);
}

TEST_CASE("router: cache aware weighs uncached tokens against prompt tokens in flight",
          "[router]") {
  router r({route_policy::cache_aware, false, 0.5}, 2);
  // Instance 0 holds 800 of the 1000 tokens but has 1000 prompt tokens in flight:
  // cost 200 + 0.5 * 1000 = 700. Instance 1 holds nothing and is idle: cost 1000.
  r.pushed(0, prompt(1000));
  std::vector<prefix_hit> hits{hit(500, 300), hit(0, 0)};
  CHECK(r.cost(0, 1000, hits[0]) == Approx(700));
  CHECK(r.cost(1, 1000, hits[1]) == Approx(1000));
  CHECK(r.pick(prompt(1000), hits) == 0);
  // With 2000 more tokens in flight on instance 0 its cost is 1700: the idle one wins.
  r.pushed(0, prompt(2000));
  CHECK(r.pick(prompt(1000), hits) == 1);
  // Equal costs go to fewer requests in flight.
  router t({route_policy::cache_aware, false, 1}, 2);
  t.pushed(0, prompt(0));
  CHECK(t.pick(prompt(100), {hit(0, 0), hit(0, 0)}) == 1);
  // A hit larger than the prompt (its last block recomputed) counts as the whole prompt.
  CHECK(t.cost(0, 100, hit(128, 0)) == Approx(0));
}

TEST_CASE("router: session affinity keeps a session's turns on its first instance", "[router]") {
  router r({route_policy::round_robin, true, 1}, 3);
  CHECK_FALSE(r.pinned(prompt(10, 7, 0)));
  size_t first = r.pick(prompt(10, 7, 0), {});
  r.pushed(first, prompt(10, 7, 0));
  r.pushed(r.pick(prompt(10), {}), prompt(10));
  REQUIRE(r.pinned(prompt(10, 7, 1)));
  CHECK(*r.pinned(prompt(10, 7, 1)) == first);
  CHECK(r.pick(prompt(10, 7, 1), {}) == first);
  router cache_aware({route_policy::cache_aware, true, 1}, 2);
  cache_aware.pushed(1, prompt(10, 9, 0));
  CHECK_FALSE(cache_aware.wants_probe(prompt(10, 9, 1)));  // pinned: no probe needed
  CHECK(cache_aware.wants_probe(prompt(10, 8, 0)));
  router without({route_policy::round_robin, false, 1}, 2);
  without.pushed(0, prompt(10, 7, 0));
  CHECK_FALSE(without.pinned(prompt(10, 7, 1)));
}
