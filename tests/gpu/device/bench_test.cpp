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
