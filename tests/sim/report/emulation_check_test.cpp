#include "sim/report/emulation_check.hpp"

#include <catch2/catch.hpp>

using namespace kvtier;

TEST_CASE("emulation check: error spread takes nearest ranks of absolute errors") {
  std::vector<double> e;
  for (int i = 1; i <= 10; ++i)
    e.push_back(i % 2 ? -0.01 * i : 0.01 * i);  // -1%, 2%, -3%, ... 10%
  error_spread s = spread_of(e);
  CHECK(s.count == 10);
  CHECK(s.p50 == Approx(0.05));
  CHECK(s.p90 == Approx(0.09));
  CHECK(s.max == Approx(0.10));
  CHECK(spread_of({}).count == 0);
  CHECK(spread_of({-0.2}).p90 == Approx(0.2));
  CHECK(relative_error(95, 100) == Approx(-0.05));
  CHECK(relative_error(1, 0) == 0);
}

TEST_CASE("emulation check: each target is named when missed, and only then") {
  error_spread ok{24, 0.01, 0.03, 0.06};
  std::vector<link_comparison> links = {{"h2d", 100, 101}, {"d2h", 119, 128},
                                        {"layer-wait stall", 0, 13, false}};
  auto missed = missed_targets(-0.017, ok, links);
  REQUIRE(missed.size() == 1);
  CHECK(missed[0] == "d2h link: -7.0%, target within 5%");
  links[1].predicted_ns = 125;
  CHECK(missed_targets(-0.017, ok, links).empty());
  error_spread wide{24, 0.02, 0.12, 0.5};
  auto both = missed_targets(0.06, wide, links);
  REQUIRE(both.size() == 2);
  CHECK(both[0] == "total swap-in time: +6.0%, target within 5%");
  CHECK(both[1] == "p90 of the per-request errors: +12.0%, target within 10%");
}

TEST_CASE("emulation check: a swap-in's overlap with D2H and with other swap-ins") {
  // {id, kind, blocks, duration, end, start}
  std::vector<transfer_log> log = {
    {1, transfer_kind::swap_in, 8, 1000, 1000, 0},
    {2, transfer_kind::backup, 8, 500, 1300, 800},    // 200 ns inside transfer 1
    {3, transfer_kind::write_back, 8, 100, 2100, 2000},  // after it
    {4, transfer_kind::swap_in, 8, 1000, 1900, 900},  // 100 ns inside
    {5, transfer_kind::backup, 8, 2000, 1500, -500},  // covers the first 1500 ns
  };
  CHECK(overlap_ns(log[0], log, true) == 200 + 1000);
  CHECK(overlap_ns(log[0], log, false) == 100);
  CHECK(overlap_ns(log[2], log, true) == 0);
}
