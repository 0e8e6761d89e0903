// The transfer benchmark end to end: a small verified run always, the full one on request
// (hidden: kvtier_gpu_tests "[.bench]" --bench-out DIR).

#include <fstream>
#include <iostream>
#include <sstream>

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

TEST_CASE("bench: the full transfer benchmark", "[.bench]") {
  const bench_cli& cli = bench_settings();
  bench_options o;
  o.transfer_bytes = cli.transfer_bytes;
  o.repetitions = cli.repetitions;
  o.verify = !cli.no_verify;
  o.block_sizes.clear();
  std::stringstream sizes(cli.block_sizes);
  for (std::string item; std::getline(sizes, item, ',');)
    o.block_sizes.push_back(static_cast<uint32_t>(std::stoul(item)));
  o.tuning.staging_slot_bytes = cli.slot_bytes;
  o.tuning.staging_slots = cli.slots;
  o.tuning.direct_min_bytes = cli.direct_min_bytes;
  o.tuning.zero_copy_ctas = cli.zero_copy_ctas;
  bench_report r = run_transfer_bench(o, &std::cout);
  std::cout << format_bench_table(r);
  auto cache = make_kv_cache(make_config(small_shape(), 4, 4));
  compute_calibration cal = cache->calibrate_compute();
  std::cout << "compute calibration: busy kernel takes " << cal.overhead_ns << " ns + "
            << cal.scale << " x spin; global timer tick " << cal.timer_tick_ns
            << " ns; worst error " << 100 * cal.max_error << "% (asked >= 20 us)\n";
  if (!cli.out_dir.empty()) {
    std::ofstream(cli.out_dir + "/transfer_bench.json") << bench_to_json(r).dump(2) << "\n";
    for (const block_size_figures& s : r.sizes)
      write_calibration_file(cli.out_dir + "/calibration_" + std::to_string(s.block_size)
                                 + ".json",
                             r, s.block_size);
  }
  CHECK(missed_targets(r).empty());
}
