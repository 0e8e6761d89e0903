// kvtier bench serve --open (app/bench/bench_serve_open.cpp): engines stepping at fixed rates
// against a served process; the curve's rows, its counts and its CSV.

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tests/serve/serve_process.hpp"

namespace fs = std::filesystem;

TEST_CASE("kvtier bench serve --open steps each engine at the offered rates", "[serve]") {
  kvtier::test::serve_process s({"--speed", "1000", "--set", "cache.storage_write=never"});
  fs::path out = fs::temp_directory_path() / ("kvtier-bench-open-" + std::to_string(::getpid()));
  fs::create_directories(out);
  std::string cmd = std::string(KVTIER_BINARY) + " bench serve --open --connect " + s.endpoint() +
                    " --trace " + KVTIER_SOURCE_DIR + "/traces/mooncake_conversation_sample.jsonl" +
                    " --engines 2 --new-per-step 3 --steps-per-s 5 10 --seconds 1 --p99-bound-us "
                    "1e8 --io-threads 2 --set cache.storage_write=never --json " + (out / "open.json").string() +
                    " --csv " + (out / "open.csv").string() + " > /dev/null 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::ifstream in(out / "open.json");
  nlohmann::json j = nlohmann::json::parse(in);
  CHECK(j["mode"] == "open");
  CHECK(j["engines"] == 2);
  CHECK(j["client_io_threads"] == 2);
  REQUIRE(j["points"].size() == 2);
  for (size_t i = 0; i < 2; ++i) {
    const auto& p = j["points"][i];
    double rate = i == 0 ? 5 : 10;
    CHECK(p["offered_steps_per_s_per_engine"].get<double>() == rate);
    CHECK(p["offered_steps_per_s"].get<double>() == 2 * rate);
    // 1 s at `rate` per engine: each engine's steps are due at 0, 1/rate, ... before the end
    // (one may start after the end on a loaded machine, and is not sent).
    double achieved = p["achieved_steps_per_s"].get<double>();
    CHECK(achieved <= 2 * rate);
    CHECK(achieved >= 2 * rate - 1);
    auto steps = static_cast<uint64_t>(achieved + 0.5);
    // Each step: a lookup per waiting request (3 new ones, and any an admission refused), an
    // allocation per new one, one step message.
    CHECK(p["rows"]["step"]["count"].get<uint64_t>() == steps);
    CHECK(p["rows"]["allocate"]["count"].get<uint64_t>() >= 3 * steps);
    CHECK(p["rows"]["lookup"]["count"].get<uint64_t>() >= 3 * steps);
    const auto& verbs = p["rows"]["verbs"];
    CHECK(verbs["p99_us"].get<double>() >= verbs["p50_us"].get<double>());
    // The start-up split: every verb call in the second its step was due (one second here, so
    // nothing after the first to compare it with).
    uint64_t by_second = 0;
    for (const auto& sec : p["verb_p99_by_second"])
      by_second += sec["count"].get<uint64_t>();
    CHECK(by_second == verbs["count"].get<uint64_t>());
    CHECK(p["verb_p99_by_second"].size() == 1);
    CHECK(p["first_second_verb_p99_us"].get<double>() ==
          p["verb_p99_by_second"][0]["p99_us"].get<double>());
    CHECK(p["after_first_second_verb_p99_us"].get<double>() == 0);
    CHECK(p["first_second_over_steady"].get<double>() == 0);
    CHECK(p["within"].get<bool>());
  }
  CHECK(j["saturation_steps_per_s_per_engine"].get<double>() == 10);
  std::ifstream csv(out / "open.csv");
  std::string header, line;
  std::getline(csv, header);
  CHECK(header.rfind("offered_steps_per_s_per_engine,", 0) == 0);
  int rows = 0;
  while (std::getline(csv, line))
    ++rows;
  CHECK(rows == 2);
  fs::remove_all(out);
  CHECK(s.stop() == 0);
}
