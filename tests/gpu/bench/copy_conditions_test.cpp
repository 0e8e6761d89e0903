#include "gpu/bench/copy_conditions.hpp"

#include <algorithm>
#include <set>

#include <catch2/catch.hpp>

#include "gpu/gpu_error.hpp"
#include "gpu/bench/transfer_bench.hpp"

using namespace kvtier::gpu;

namespace {

condition_figure cell(copy_condition c, transfer_direction d, uint32_t blocks, double ms) {
  condition_figure f;
  f.condition = c;
  f.direction = d;
  f.blocks = blocks;
  f.bytes = uint64_t{blocks} << 23;  // 8 MiB blocks
  f.median_ns = ms * 1e6;
  return f;
}

}  // namespace

TEST_CASE("copy conditions: scattered host ids are distinct, in the pool, none consecutive") {
  for (uint32_t count : {1u, 2u, 8u, 32u, 128u})
    for (uint32_t pool : {2 * count - 1, 2 * count, 4 * count + 3}) {
      std::vector<uint32_t> ids = scattered_host_ids(7, count, pool);
      REQUIRE(ids.size() == count);
      std::vector<uint32_t> sorted = ids;
      std::sort(sorted.begin(), sorted.end());
      for (size_t i = 1; i < sorted.size(); ++i)
        REQUIRE(sorted[i] - sorted[i - 1] >= 2);
      REQUIRE(sorted.back() < pool);
    }
}

TEST_CASE("copy conditions: the scattering is seeded and shuffled") {
  std::vector<uint32_t> a = scattered_host_ids(3, 64, 256);
  CHECK(a == scattered_host_ids(3, 64, 256));
  CHECK(a != scattered_host_ids(4, 64, 256));
  CHECK_FALSE(std::is_sorted(a.begin(), a.end()));
  // At the tightest pool only one set is possible: every other id.
  std::vector<uint32_t> tight = scattered_host_ids(9, 5, 9);
  std::sort(tight.begin(), tight.end());
  CHECK(tight == std::vector<uint32_t>{0, 2, 4, 6, 8});
  CHECK_THROWS_AS(scattered_host_ids(1, 5, 8), gpu_error);
}

TEST_CASE("copy conditions: rates and the ratio to the baseline of the same size and direction") {
  using c = copy_condition;
  const auto h2d = transfer_direction::h2d, d2h = transfer_direction::d2h;
  std::vector<condition_figure> cells = {
    cell(c::baseline, h2d, 32, 4.8), cell(c::callbacks, h2d, 32, 5.28),
    cell(c::baseline, d2h, 32, 5.0), cell(c::replay_like, d2h, 32, 5.5),
    cell(c::baseline, h2d, 8, 1.25), cell(c::scattered_host, h2d, 8, 2.5),
    cell(c::compute_thread, d2h, 8, 1.0)};  // no D2H baseline at 8 blocks
  rate_against_baseline(cells);
  CHECK(cells[0].gbps == Approx(32.0 * (1 << 23) / 4.8e6));
  CHECK(cells[0].of_baseline == Approx(1.0));
  CHECK(cells[1].of_baseline == Approx(4.8 / 5.28));
  CHECK(cells[3].of_baseline == Approx(5.0 / 5.5));
  CHECK(cells[5].of_baseline == Approx(0.5));
  CHECK(cells[6].gbps > 0);
  CHECK(cells[6].of_baseline == 0);
}

TEST_CASE("copy conditions: the table has every measured row and the JSON every field") {
  using c = copy_condition;
  std::vector<condition_figure> cells;
  for (copy_condition k : all_copy_conditions())
    for (transfer_direction d : {transfer_direction::h2d, transfer_direction::d2h})
      cells.push_back(cell(k, d, 32, k == c::baseline ? 5.0 : 5.5));
  rate_against_baseline(cells);
  std::string table = format_conditions_table(cells, 64);
  CHECK(table.find("64-token blocks") != std::string::npos);
  for (copy_condition k : all_copy_conditions())
    CHECK(table.find(to_string(k)) != std::string::npos);
  CHECK(table.find("90.9%") != std::string::npos);
  CHECK(table.find("100.0%") != std::string::npos);

  nlohmann::json j = conditions_json(cells);
  REQUIRE(j.size() == cells.size());
  CHECK(j[2]["condition"] == "callbacks");
  CHECK(j[2]["direction"] == "h2d");
  CHECK(j[2]["blocks"] == 32);
  CHECK(j[2]["bytes"] == uint64_t{32} << 23);
  CHECK(j[2]["median_ms"].get<double>() == Approx(5.5));
  CHECK(j[2]["of_baseline"].get<double>() == Approx(5.0 / 5.5));
  CHECK(j[2]["verified"] == false);
  CHECK(j[2].contains("gbps"));
}

TEST_CASE("copy conditions: the bench's JSON carries them only when measured") {
  bench_report r;
  r.device.available = true;
  block_size_figures s;
  s.block_size = 64;
  s.blocks = 256;
  r.sizes.push_back(s);
  CHECK_FALSE(bench_to_json(r)["block_sizes"][0].contains("conditions"));
  r.sizes[0].conditions.push_back(cell(copy_condition::baseline, transfer_direction::d2h, 8, 1));
  rate_against_baseline(r.sizes[0].conditions);
  nlohmann::json j = bench_to_json(r)["block_sizes"][0];
  REQUIRE(j["conditions"].size() == 1);
  CHECK(j["conditions"][0]["condition"] == "baseline");
  CHECK(format_bench_table(r).find("copy rates under replay conditions") != std::string::npos);
}

TEST_CASE("copy conditions: the sweep fits through the replay-like column where measured") {
  sweep_point p;
  p.median_ns = 1.0e6;
  p.fresh_host_ns = 1.1e6;
  CHECK(p.fitted_source_ns() == 1.1e6);
  p.replay_like_ns = 1.2e6;
  CHECK(p.fitted_source_ns() == 1.2e6);
  p.fitted_ns = 1.2e6;
  CHECK(p.residual() == Approx(0));

  link_sweep w;
  w.direction = transfer_direction::d2h;
  p.blocks = 8;
  p.bytes = uint64_t{8} << 23;
  w.points = {p};
  bench_report r;
  block_size_figures s;
  s.block_size = 64;
  s.sweeps = {w};
  r.sizes.push_back(s);
  nlohmann::json point = bench_to_json(r)["block_sizes"][0]["sweeps"][0]["points"][0];
  CHECK(point["replay_like_ms"].get<double>() == Approx(1.2));
  CHECK(point["fresh_host_ms"].get<double>() == Approx(1.1));
  CHECK(format_bench_table(r).find("replay-like") != std::string::npos);
}

TEST_CASE("copy conditions: the D2H calibration refits through the replay-like copies") {
  // The D2H sweep of an H200 (BENCHMARKS.md, "Copy rates under replay conditions"): blocks,
  // ms on fresh host blocks, ms under the replay's conditions.
  const double rows[][3] = {{1, 0.179, 0.177},    {2, 0.325, 0.335},    {4, 0.633, 0.694},
                            {8, 1.250, 1.351},    {16, 2.483, 2.676},   {32, 4.936, 5.314},
                            {64, 9.828, 10.558},  {128, 19.666, 21.103}, {256, 39.286, 42.412}};
  std::vector<sweep_point> points;
  std::vector<condition_figure> cells;
  for (const auto& r : rows) {
    sweep_point p;
    p.blocks = static_cast<uint32_t>(r[0]);
    p.bytes = uint64_t{p.blocks} << 23;
    p.median_ns = p.fresh_host_ns = r[1] * 1e6;
    points.push_back(p);
    cells.push_back(cell(copy_condition::replay_like, transfer_direction::d2h, p.blocks, r[2]));
  }
  // A cell of another condition must not count.
  cells.push_back(cell(copy_condition::baseline, transfer_direction::d2h, 256, 30.0));
  block_size_figures s;
  s.sweeps = {fit_sweep(transfer_direction::h2d, transfer_method::staging, points, 32),
              fit_sweep(transfer_direction::d2h, transfer_method::staging, points, 32)};
  s.h2d_fit = s.sweeps[0].fit;
  s.d2h_fit = s.sweeps[1].fit;
  CHECK(s.d2h_fit.bandwidth_gbps > 54);

  refit_d2h_through(cells, s, 32);
  CHECK(s.d2h_fit.bandwidth_gbps == Approx(50.5).margin(0.5));
  CHECK(s.d2h_fit.bandwidth_gbps == s.sweeps[1].fit.bandwidth_gbps);
  CHECK(s.sweeps[1].rejected.empty());
  CHECK(s.sweeps[1].max_residual < sweep_residual_max);
  for (size_t i = 0; i < points.size(); ++i) {
    CHECK(s.sweeps[1].points[i].replay_like_ns == Approx(rows[i][2] * 1e6));
    CHECK(s.sweeps[0].points[i].replay_like_ns == 0);
  }
  CHECK(s.h2d_fit.bandwidth_gbps > 54);
  CHECK(s.h2d_fit.bandwidth_gbps == s.sweeps[0].fit.bandwidth_gbps);
}
