// The transfer benchmark end to end, on a small verified run (the full one is
// `kvtier bench transfer`).

#include <iostream>

#include <catch2/catch.hpp>

#include "support.hpp"

using namespace kvtier::gpu;
using namespace kvtier::gpu::test;

TEST_CASE("bench: a small verified run measures every method", "[gpu][bench]") {
  bench_options o;
  o.block_sizes = {16};
  o.transfer_bytes = 64ull << 20;
  o.repetitions = 2;
  bench_report r = run_transfer_bench(o);
  REQUIRE(r.sizes.size() == 1);
  const block_size_figures& s = r.sizes[0];
  CHECK(s.blocks == 32);
  CHECK(s.methods.size() == 8);
  for (const method_figures& m : s.methods) {
    INFO(to_string(m.method) << " " << to_string(m.direction));
    CHECK(m.verified);
    CHECK(m.gbps > 1);
  }
  CHECK(s.duplex.size() == 3);
  CHECK(s.bulk_h2d_gbps > 1);
  CHECK(s.h2d_fit.bandwidth_gbps > 1);
  nlohmann::json cal = calibration_json(r, 16);
  CHECK(cal.at("duplex_gbps").get<double>() > 1);
  std::cout << format_bench_table(r);
}

TEST_CASE("bench: every copy condition verified, and the sweep timed under replay conditions",
          "[gpu][bench]") {
  bench_options o;
  o.block_sizes = {16};
  o.transfer_bytes = 32ull << 20;
  o.repetitions = 2;
  o.methods = {transfer_method::staging};
  o.condition_sizes = {2, 5};
  bench_report r = run_transfer_bench(o);
  REQUIRE(r.sizes.size() == 1);
  const block_size_figures& s = r.sizes[0];
  CHECK(s.conditions.size() == 2 * 2 * all_copy_conditions().size());
  for (const condition_figure& c : s.conditions) {
    INFO(to_string(c.condition) << " " << to_string(c.direction) << " " << c.blocks);
    CHECK(c.verified);
    CHECK(c.gbps > 0.1);
    CHECK(c.of_baseline > 0);
  }
  for (const link_sweep& w : s.sweeps)
    for (const sweep_point& p : w.points)
      CHECK((p.replay_like_ns > 0) == (w.direction == transfer_direction::d2h));
  std::cout << format_bench_table(r);
}
