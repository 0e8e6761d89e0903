// The SLO study's search (sim/sweep/rate_search.hpp): brackets, then bisects to the stated
// precision, with few replays, and says when no rate or every rate meets the SLO.

#include <catch2/catch.hpp>

#include <cmath>

#include "sim/sweep/rate_search.hpp"

using namespace kvtier;

namespace {

rate_search run(double capacity, double start, double precision) {
  rate_search s(start, precision);
  while (!s.done())
    s.record(s.next() <= capacity);
  return s;
}

}  // namespace

TEST_CASE("rate search: the sustained rate to the stated precision", "[sweep][slo]") {
  for (double capacity : {0.013, 0.125, 0.3, 1.7, 9.0}) {
    rate_search s = run(capacity, 0.125, 0.05);
    INFO("capacity " << capacity);
    CHECK(s.state() == rate_search::outcome::bracketed);
    CHECK(s.sustained() <= capacity);
    CHECK(s.failing() > capacity);
    CHECK(s.failing() <= s.sustained() * 1.05);
    CHECK(s.iterations() <= 12);  // log2 of the distance, then log2(log(2) / log(1.05))
  }
}

TEST_CASE("rate search: no rate, or every rate, meets the SLO", "[sweep][slo]") {
  rate_search never = run(0, 1, 0.05);
  CHECK(never.state() == rate_search::outcome::never_met);
  CHECK(never.sustained() == 0);
  rate_search always = run(1e12, 1, 0.05);
  CHECK(always.state() == rate_search::outcome::always_met);
  CHECK(always.sustained() >= 4096);
}

TEST_CASE("rate search: whole steps (session copies) bracket to one step, within the ceiling",
          "[sweep][slo]") {
  for (double capacity : {1.0, 3.0, 7.0, 12.0, 50.0, 333.0}) {
    rate_search s(4, 0.05, 12, {1, 4096});
    while (!s.done()) {
      INFO("capacity " << capacity << ", next " << s.next());
      REQUIRE(s.next() == std::floor(s.next()));  // whole copies only
      REQUIRE(s.next() >= 1);
      s.record(s.next() <= capacity);
    }
    INFO("capacity " << capacity);
    CHECK(s.state() == rate_search::outcome::bracketed);
    CHECK(s.sustained() <= capacity);
    CHECK(s.failing() > capacity);
    CHECK((s.failing() == s.sustained() + 1 || s.failing() <= s.sustained() * 1.05));
    if (capacity < 20)  // below 20 copies one copy is more than 5%: the exact count
      CHECK(s.sustained() == std::floor(capacity));
    CHECK(s.iterations() <= 12);
  }
  rate_search never(4, 0.05, 12, {1, 4096});
  while (!never.done())
    never.record(false);
  CHECK(never.state() == rate_search::outcome::never_met);
  CHECK(never.failing() == 1);  // one copy, the trace as recorded, was tried
  rate_search always(4, 0.05, 12, {1, 4096});
  while (!always.done())
    always.record(true);
  CHECK(always.state() == rate_search::outcome::always_met);
  CHECK(always.sustained() == 4096);
}
