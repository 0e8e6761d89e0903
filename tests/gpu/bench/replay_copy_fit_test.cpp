#include "gpu/bench/replay_copy_fit.hpp"

#include <catch2/catch.hpp>

using namespace kvtier::gpu;

namespace {

constexpr uint64_t block_bytes = 8ull << 20;  // Llama-3-8B-like, 64-token blocks

/// Copies of a real run on a line: `fixed_ns` + bytes / `gbps`, `per_size` copies per size.
std::vector<measured_copy> copies_on(transfer_direction d, double fixed_ns, double gbps,
                                     std::vector<uint32_t> sizes, int per_size) {
  std::vector<measured_copy> out;
  for (uint32_t b : sizes)
    for (int i = 0; i < per_size; ++i) {
      // On the line, then +1%, -1%: the median is the line.
      const double spread[] = {0, 0.01, -0.01};
      double t = fixed_ns + static_cast<double>(b * block_bytes) / gbps;
      out.push_back({d, b, t * (1 + spread[i % 3])});
    }
  return out;
}

std::vector<measured_copy> both_on_lines() {
  auto c = copies_on(transfer_direction::h2d, 128'000, 52.3, {1, 2, 3, 5, 8, 16, 40}, 3);
  auto d = copies_on(transfer_direction::d2h, 107'000, 51.95, {4, 8, 16, 32, 33, 64}, 3);
  c.insert(c.end(), d.begin(), d.end());
  return c;
}

nlohmann::json bench_calibration() {
  return {{"schema", "kvtier.calibration/1"},
          {"device", "NVIDIA H200"},
          {"block_size", 64},
          {"h2d", {{"method", "staging"}, {"bandwidth_gbps", 55.7}, {"latency_us", 176.0},
                   {"layer_latency_us", 5.5}}},
          {"d2h", {{"method", "staging"}, {"bandwidth_gbps", 54.6}, {"latency_us", 25.0}}},
          {"duplex_gbps", 94.5},
          {"compute", {{"layer_wait_us", 1.9}}}};
}

}  // namespace

TEST_CASE("replay copy fit: one point per size, the median of its copies", "[gpu][bench]") {
  std::vector<uint32_t> counts;
  std::vector<measured_copy> copies = {{transfer_direction::d2h, 4, 3e6},
                                       {transfer_direction::d2h, 4, 1e6},
                                       {transfer_direction::d2h, 4, 2e6},
                                       {transfer_direction::h2d, 4, 9e6},
                                       {transfer_direction::d2h, 2, 1e6},
                                       {transfer_direction::d2h, 0, 1e6}};
  std::vector<sweep_point> p = copy_points(copies, transfer_direction::d2h, block_bytes, &counts);
  REQUIRE(p.size() == 2);
  CHECK(p[0].blocks == 2);
  CHECK(p[1].blocks == 4);
  CHECK(p[1].median_ns == 2e6);
  CHECK(p[1].bytes == 4 * block_bytes);
  CHECK(counts == std::vector<uint32_t>{1, 3});
}

TEST_CASE("replay copy fit: fixed cost and rate of each direction from the run's copies",
          "[gpu][bench]") {
  replay_copy_fit f = fit_replay_copies(both_on_lines(), block_bytes, 32);
  CHECK(replay_fit_refusal(f).empty());
  CHECK(f.h2d.fit.bandwidth_gbps == Approx(52.3).epsilon(1e-6));
  CHECK(f.h2d.fit.latency_us == Approx(128.0).epsilon(1e-6));
  CHECK(f.h2d.fit.layer_latency_us == Approx(4.0).epsilon(1e-6));
  CHECK(f.d2h.fit.bandwidth_gbps == Approx(51.95).epsilon(1e-6));
  CHECK(f.d2h.fit.latency_us == Approx(107.0).epsilon(1e-6));
  CHECK(f.h2d_copies == std::vector<uint32_t>(7, 3));
  CHECK(f.d2h.max_residual < 1e-9);
}

TEST_CASE("replay copy fit: slow sizes are left out and named, up to one in ten",
          "[gpu][bench]") {
  std::vector<uint32_t> sizes;
  for (uint32_t b = 1; b <= 20; ++b)
    sizes.push_back(b);
  auto copies = copies_on(transfer_direction::h2d, 128'000, 52.3, sizes, 1);
  auto d2h = copies_on(transfer_direction::d2h, 107'000, 51.95, {4, 8, 16}, 1);
  copies.insert(copies.end(), d2h.begin(), d2h.end());
  copies[2].duration_ns *= 1.7;  // 3 blocks: the outliers of the H100 host A (docs/gpu.md)
  copies[10].duration_ns *= 1.5;
  replay_copy_fit f = fit_replay_copies(copies, block_bytes, 32);
  CHECK(replay_left_out_max(20) == 2);
  CHECK(replay_fit_refusal(f).empty());
  CHECK_FALSE(f.h2d.points[2].used);
  CHECK_FALSE(f.h2d.points[10].used);
  CHECK(f.h2d.fit.bandwidth_gbps == Approx(52.3).epsilon(1e-6));
  std::string table = format_replay_fit(f);
  CHECK(table.find("(left out)") != std::string::npos);
  CHECK(table.find("replay copies H2D") != std::string::npos);
}

TEST_CASE("replay copy fit: a run no line fits is refused, naming the size", "[gpu][bench]") {
  auto copies = both_on_lines();
  for (measured_copy& c : copies)
    if (c.direction == transfer_direction::d2h && (c.blocks == 8 || c.blocks == 32))
      c.duration_ns *= 2;  // two slow sizes of six: more than the one left out
  replay_copy_fit f = fit_replay_copies(copies, block_bytes, 32);
  std::string why = replay_fit_refusal(f);
  CHECK(why.find("the D2H fit to the replay's copies") != std::string::npos);
  CHECK(why.find("-block copies by") != std::string::npos);
  CHECK(why.find("left out") != std::string::npos);
  CHECK(format_replay_fit(f).find("REFUSED") != std::string::npos);
  replay_copy_fit none = fit_replay_copies({}, block_bytes, 32);
  CHECK(replay_fit_refusal(none).find("no copies") != std::string::npos);
}

TEST_CASE("replay copy fit: the bench's calibration with the run's rates, and its source",
          "[gpu][bench]") {
  replay_copy_fit f = fit_replay_copies(both_on_lines(), block_bytes, 32);
  nlohmann::json src = {{"kind", "replay"}, {"traces", {"traces/emulation_check.jsonl"}}};
  nlohmann::json j = replay_calibration_json(bench_calibration(), f, src);
  CHECK(j.at("schema") == "kvtier.calibration/1");
  CHECK(j.at("h2d").at("method") == "staging");
  CHECK(j.at("h2d").at("bandwidth_gbps").get<double>() == Approx(52.3));
  CHECK(j.at("h2d").at("layer_latency_us").get<double>() == Approx(4.0));
  CHECK(j.at("d2h").at("latency_us").get<double>() == Approx(107.0));
  CHECK(j.at("duplex_gbps").get<double>() == 94.5);  // not measured by a replay: kept
  CHECK(j.at("compute").at("layer_wait_us").get<double>() == 1.9);
  CHECK(j.at("source").at("kind") == "replay");
  CHECK(j.at("source").at("traces")[0] == "traces/emulation_check.jsonl");
  CHECK(j.at("source").contains("d2h_max_residual"));
}

TEST_CASE("replay copy fit: the layer wait comes from steps whose data the model had in place",
          "[gpu][bench]") {
  // Four layers. Steps the model had waiting for data (10 us) do not count; of the rest the
  // median measured stall per layer is what each layer loses.
  std::vector<waited_step> steps = {{0, 14'000}, {0, 13'600}, {500, 14'400}, {0, 14'800},
                                    {0, 14'000}, {10'000, 90'000}, {0, 13'200}};
  size_t used = 0;
  std::optional<double> w = fit_layer_wait(steps, 4, &used);
  CHECK(used == 6);
  REQUIRE(w);
  CHECK(*w == Approx(3500));  // 14'000 / 4: the median of 3300 3400 3500 3500 3600 3700
  // Too few such steps: no figure, and the calibration keeps the bench's.
  steps.resize(4);
  CHECK_FALSE(fit_layer_wait(steps, 4, &used));
  CHECK(used == 4);
  nlohmann::json base = {{"compute", {{"layer_wait_us", 1.9}}}, {"h2d", {}}, {"d2h", {}}};
  replay_copy_fit fit;
  CHECK(replay_calibration_json(base, fit, {})["compute"]["layer_wait_us"] == 1.9);
  CHECK(replay_calibration_json(base, fit, {}, {3500.0, {}})["compute"]["layer_wait_us"] == 3.5);
  CHECK_FALSE(replay_calibration_json(base, fit, {})["h2d"].contains("submit_us_per_block"));
  CHECK(replay_calibration_json(base, fit, {}, {{}, 50'000.0})["h2d"]["submit_us_per_block"]
        == 50.0);
}

TEST_CASE("replay copy fit: the host's time per swapped-in block, past every step's own",
          "[gpu][bench]") {
  // Steps without a swap-in run 300 us past the model (the median); steps after one 300 us plus
  // about 50 us per block.
  std::vector<step_delay> steps = {{0, 280'000}, {0, 300'000}, {0, 320'000}, {32, 1'900'000},
                                   {48, 2'700'000}, {112, 6'000'000}, {705, 35'300'000},
                                   {16, 1'200'000}};
  size_t used = 0;
  std::optional<double> k = fit_submit_per_block(steps, &used);
  CHECK(used == 5);
  REQUIRE(k);
  // (1.6 ms / 32, 2.4 / 48, 5.7 / 112, 35 / 705, 0.9 / 16): 50, 50, 50.9, 49.6, 56.25 us
  CHECK(*k == Approx(50'000));
  // Steps after a swap-in faster than the others' median count as 0, not less.
  std::vector<step_delay> quick = {{0, 300'000}, {8, 100'000}, {8, 100'000}, {8, 100'000},
                                   {8, 100'000}, {8, 100'000}};
  REQUIRE(fit_submit_per_block(quick));
  CHECK(*fit_submit_per_block(quick) == 0);
  // Fewer than 5 steps after a swap-in, or none without one: no figure.
  CHECK_FALSE(fit_submit_per_block({{0, 1}, {4, 100}, {4, 100}}));
  CHECK_FALSE(fit_submit_per_block({{4, 100}, {4, 100}, {4, 100}, {4, 100}, {4, 100}}));
}
