#include "gpu/bench/transfer_bench.hpp"

#include <cstdio>
#include <fstream>

#include <catch2/catch.hpp>

using namespace kvtier::gpu;

namespace {

method_figures fig(transfer_method m, transfer_direction d, double gbps, double bulk) {
  method_figures f;
  f.method = m;
  f.direction = d;
  f.gbps = gbps;
  f.median_ns = 2e9 / gbps;
  f.of_bulk = gbps / bulk;
  f.verified = true;
  return f;
}

/// Figures shaped like the H200 reference measurements, meeting every target.
bench_report sample_report() {
  bench_report r;
  r.device.available = true;
  r.device.name = "NVIDIA H200";
  r.measured_at = "2026-11-21T10:00:00Z";
  r.shape = llama3_8b_kv();
  r.transfer_bytes = 2ull << 30;
  r.repetitions = 5;
  r.verify = true;
  for (uint32_t bs : {16u, 64u}) {
    block_size_figures s;
    s.block_size = bs;
    s.blocks = bs == 16 ? 1024 : 256;
    s.bytes = r.transfer_bytes;
    s.bulk_h2d_gbps = 55.6;
    s.bulk_d2h_gbps = 55.4;
    s.bulk_duplex_gbps = 101.7;
    using tm = transfer_method;
    for (transfer_direction d : {transfer_direction::h2d, transfer_direction::d2h}) {
      double bulk = d == transfer_direction::h2d ? 55.6 : 55.4;
      s.methods.push_back(fig(tm::per_chunk, d, bs == 16 ? 11 : 26, bulk));
      s.methods.push_back(fig(tm::batched, d, 45, bulk));
      s.methods.push_back(fig(tm::staging, d, 54, bulk));
    }
    s.duplex.push_back(duplex_figures{tm::batched, 0, 90, 90 / 101.7, true});
    s.duplex.push_back(duplex_figures{tm::staging, 0, 99, 99 / 101.7, true});
    s.h2d_fit = link_fit{tm::staging, 54.2, 21.5, 1.25};
    s.d2h_fit = link_fit{tm::staging, 54.0, 15.0, 0};
    r.sizes.push_back(s);
  }
  return r;
}

}  // namespace

TEST_CASE("fit_link: latency and bandwidth through two points", "[gpu][bench]") {
  // 1 MB in 30 us and 1 GB in 18.03 ms: 55.5 GB/s and 11.98 us fixed cost.
  link_fit f = fit_link(1'000'000, 30'000, 1'000'000'000, 18'030'000);
  CHECK(f.bandwidth_gbps == Approx(55.5));
  CHECK(f.latency_us == Approx(30.0 - 1e6 / 55.5 / 1e3));
  CHECK_THROWS_AS(fit_link(1000, 10, 1000, 20), gpu_error);
  CHECK_THROWS_AS(fit_link(1000, 20, 2000, 10), gpu_error);
}

TEST_CASE("calibration JSON: the schema the modelled backend reads", "[gpu][bench]") {
  nlohmann::json j = calibration_json(sample_report(), 64);
  CHECK(j.at("schema") == "kvtier.calibration/1");
  CHECK(j.at("device") == "NVIDIA H200");
  CHECK(j.at("measured_at") == "2026-11-21T10:00:00Z");
  CHECK(j.at("block_size") == 64);
  CHECK(j.at("shape").at("layers") == 32);
  CHECK(j.at("shape").at("kv_heads") == 8);
  CHECK(j.at("shape").at("head_dim") == 128);
  CHECK(j.at("shape").at("dtype_bytes") == 2);
  CHECK(j.at("shape").at("block_size") == 64);
  CHECK(j.at("h2d").at("method") == "staging");
  CHECK(j.at("h2d").at("bandwidth_gbps") == Approx(54.2));
  CHECK(j.at("h2d").at("latency_us") == Approx(21.5));
  CHECK(j.at("h2d").at("layer_latency_us") == Approx(1.25));
  CHECK(j.at("d2h").at("method") == "staging");
  CHECK(j.at("d2h").at("bandwidth_gbps") == Approx(54.0));
  CHECK(j.at("d2h").at("latency_us") == Approx(15.0));
  CHECK_FALSE(j.at("d2h").contains("layer_latency_us"));
  CHECK(j.at("duplex_gbps") == Approx(99));  // the staging pair: what the backend runs
  CHECK(j.size() == 8);
  CHECK_THROWS_AS(calibration_json(sample_report(), 32), gpu_error);
}

TEST_CASE("calibration JSON: the compute emulation's layer wait, once measured",
          "[gpu][bench]") {
  bench_report r = sample_report();
  r.compute.layer_wait_ns = 17250;
  nlohmann::json j = calibration_json(r, 64);
  CHECK(j.at("compute").at("layer_wait_us") == Approx(17.25));
  CHECK(j.size() == 9);
  CHECK_FALSE(calibration_json(sample_report(), 64).contains("compute"));
}

TEST_CASE("calibration file: written as the JSON above", "[gpu][bench]") {
  std::string path = "kvtier_calibration_test.json";
  write_calibration_file(path, sample_report(), 16);
  std::ifstream in(path);
  nlohmann::json j = nlohmann::json::parse(in);
  CHECK(j == calibration_json(sample_report(), 16));
  std::remove(path.c_str());
  CHECK_THROWS_AS(write_calibration_file("/nonexistent-dir/x.json", sample_report(), 16),
                  gpu_error);
}

TEST_CASE("targets: met, and each miss named", "[gpu][bench]") {
  bench_report r = sample_report();
  CHECK(missed_targets(r).empty());
  r.sizes[0].methods[5].gbps = 50;  // staging D2H at 16 tokens: 90% of bulk
  r.sizes[0].methods[5].of_bulk = 50 / 55.4;
  r.sizes[1].duplex[1].of_bulk = 0.85;
  r.sizes[1].methods[0].gbps = 30;  // per-chunk H2D at 64 tokens: staging only 1.8x
  std::vector<std::string> misses = missed_targets(r);
  CHECK(misses == std::vector<std::string>{
                      "D2H: best method below 95% of bulk at 16-token blocks",
                      "H2D: best method not 2x per_chunk at 64-token blocks",
                      "duplex: best pair below 90% of bulk duplex at 64-token blocks"});
}

TEST_CASE("bench table and JSON carry every figure", "[gpu][bench]") {
  bench_report r = sample_report();
  std::string table = format_bench_table(r);
  CHECK(table.find("block 16 tokens") != std::string::npos);
  CHECK(table.find("block 64 tokens") != std::string::npos);
  CHECK(table.find("per_chunk") != std::string::npos);
  size_t row = table.find("\n  staging");
  REQUIRE(row != std::string::npos);
  std::string line = table.substr(row + 1, table.find('\n', row + 1) - row - 1);
  CHECK(line.find(" 54.0 ") != std::string::npos);
  CHECK(line.find(" 97.1%") != std::string::npos);
  CHECK(table.find("targets: all met") != std::string::npos);
  nlohmann::json j = bench_to_json(r);
  CHECK(j.at("schema") == "kvtier.transfer_bench/1");
  CHECK(j.at("shape").at("layers") == 32);
  CHECK_FALSE(j.at("shape").contains("block_size"));  // each block size has its own row
  CHECK(j.at("block_sizes").size() == 2);
  CHECK(j.at("block_sizes")[1].at("methods").size() == 6);
  CHECK(j.at("block_sizes")[1].at("calibration") == calibration_json(r, 64));
  CHECK(j.at("targets").at("met") == true);
}

namespace {

/// Sweep points on t = fixed + bytes / gbps, 8 MiB blocks (64-token Llama-3-8B blocks).
std::vector<sweep_point> sweep_on(double fixed_ns, double gbps, uint32_t blocks) {
  std::vector<sweep_point> points;
  for (uint32_t k : sweep_sizes(blocks)) {
    sweep_point p;
    p.blocks = k;
    p.bytes = uint64_t(k) << 23;
    p.median_ns = fixed_ns + p.bytes / gbps;
    points.push_back(p);
  }
  return points;
}

}  // namespace

TEST_CASE("sweep sizes: powers of two up to the whole transfer", "[gpu][bench]") {
  CHECK(sweep_sizes(256) == std::vector<uint32_t>{1, 2, 4, 8, 16, 32, 64, 128, 256});
  CHECK(sweep_sizes(100) == std::vector<uint32_t>{1, 2, 4, 8, 16, 32, 64, 100});
  CHECK(sweep_sizes(1) == std::vector<uint32_t>{1});
}

TEST_CASE("fit_sweep: fixed cost and rate through every size, residuals near 0",
          "[gpu][bench]") {
  link_sweep w = fit_sweep(transfer_direction::h2d, transfer_method::staging,
                           sweep_on(128'000, 52.0, 256), 32);
  CHECK(w.rejected.empty());
  CHECK(w.fit.bandwidth_gbps == Approx(52.0).epsilon(1e-6));
  CHECK(w.fit.latency_us == Approx(128.0).epsilon(1e-6));
  CHECK(w.fit.layer_latency_us == Approx(4.0).epsilon(1e-6));  // the model charges it per layer
  CHECK(w.max_residual < 1e-9);
  for (const sweep_point& p : w.points)
    CHECK(p.fitted_ns == Approx(p.median_ns));
}

TEST_CASE("fit_sweep: one slow small copy is left out instead of setting the fixed cost",
          "[gpu][bench]") {
  // The H200's calibration: its 4-block copies ran at half speed, and a fit through them and
  // the full transfer charged 836.7 us per swap-in that real swap-ins did not take.
  std::vector<sweep_point> points = sweep_on(30'000, 52.0, 256);
  points[2].median_ns *= 2;
  link_sweep w = fit_sweep(transfer_direction::d2h, transfer_method::staging, points, 32);
  CHECK(w.rejected.empty());
  CHECK_FALSE(w.points[2].used);
  CHECK(w.points[2].residual() == Approx(-0.5).margin(0.01));
  CHECK(w.fit.bandwidth_gbps == Approx(52.0).epsilon(1e-6));
  CHECK(w.fit.latency_us == Approx(30.0).epsilon(1e-6));
  CHECK(w.fit.layer_latency_us == 0);
}

TEST_CASE("fit_sweep: a sweep no line fits is refused, naming the size it misses",
          "[gpu][bench]") {
  std::vector<sweep_point> points = sweep_on(30'000, 52.0, 256);
  points[1].median_ns *= 3;
  points[4].median_ns *= 2;
  link_sweep w = fit_sweep(transfer_direction::h2d, transfer_method::staging, points, 32);
  CHECK_FALSE(w.rejected.empty());
  CHECK(w.rejected.find("-block copies by") != std::string::npos);
  CHECK(w.max_residual > sweep_residual_max);
  bench_report r = sample_report();
  r.sizes[1].sweeps = {w};
  CHECK(calibration_refusal(r, 64).find("H2D sweep at 64-token blocks") != std::string::npos);
  CHECK(calibration_refusal(r, 16).empty());
  std::string table = format_bench_table(r);
  CHECK(table.find("REFUSED") != std::string::npos);
  CHECK(table.find("(left out)") != std::string::npos);
  CHECK(bench_to_json(r).at("block_sizes")[1].at("sweeps")[0].at("points").size() == 9);
}
