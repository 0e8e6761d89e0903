#include "gpu/block_runs.hpp"

#include <catch2/catch.hpp>

using namespace kvtier::gpu;

TEST_CASE("find_runs: both ids must grow by one", "[gpu][runs]") {
  std::vector<block_pair> pairs{{5, 0}, {6, 1}, {7, 2}, {9, 3}, {10, 5}, {11, 6}, {12, 6}};
  auto runs = find_runs(pairs, run_rule::both_ids);
  // 5..7 with 0..2; 9 alone (host 3, then device 10 but host 5); 10..11 with 5..6; 12 alone
  // (host 6 again)
  CHECK(runs == std::vector<block_run>{{0, 3}, {3, 1}, {4, 2}, {6, 1}});
}

TEST_CASE("find_runs: host runs ignore device ids", "[gpu][runs]") {
  std::vector<block_pair> pairs{{5, 0}, {9, 1}, {2, 2}, {3, 4}, {8, 5}};
  CHECK(find_runs(pairs, run_rule::host_id) == std::vector<block_run>{{0, 3}, {3, 2}});
  CHECK(find_runs(pairs, run_rule::both_ids)
        == std::vector<block_run>{{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}});
}

TEST_CASE("find_runs: empty and single lists", "[gpu][runs]") {
  CHECK(find_runs({}, run_rule::both_ids).empty());
  CHECK(find_runs({{3, 4}}, run_rule::host_id) == std::vector<block_run>{{0, 1}});
}

TEST_CASE("check_pairs: ids must lie in their pools", "[gpu][runs]") {
  CHECK_FALSE(check_pairs({{9, 3}}, transfer_direction::h2d, 10, 4));
  auto dev = check_pairs({{1, 1}, {10, 0}}, transfer_direction::h2d, 10, 4);
  REQUIRE(dev);
  CHECK(*dev == "device block 10 is out of range [0, 10)");
  auto host = check_pairs({{1, 4}}, transfer_direction::d2h, 10, 4);
  REQUIRE(host);
  CHECK(*host == "host block 4 is out of range [0, 4)");
}

TEST_CASE("check_pairs: a destination may be written once", "[gpu][runs]") {
  // H2D writes device blocks: one host block into two device blocks is fine, the reverse not.
  CHECK_FALSE(check_pairs({{1, 0}, {2, 0}}, transfer_direction::h2d, 10, 4));
  auto h2d = check_pairs({{1, 0}, {1, 2}}, transfer_direction::h2d, 10, 4);
  REQUIRE(h2d);
  CHECK(*h2d == "device block 1 is the destination of more than one pair");
  CHECK_FALSE(check_pairs({{1, 0}, {1, 2}}, transfer_direction::d2h, 10, 4));
  auto d2h = check_pairs({{1, 3}, {2, 3}}, transfer_direction::d2h, 10, 4);
  REQUIRE(d2h);
  CHECK(*d2h == "host block 3 is the destination of more than one pair");
  CHECK_FALSE(check_pairs({}, transfer_direction::d2h, 10, 4));
}
