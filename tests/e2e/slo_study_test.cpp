// Load for closed-loop traces (docs/traces.md "Workload variants", docs/sweep.md "The SLO
// capacity study"): trace.session_copies replays an agentic trace as N users, deterministic per
// seed, and the SLO study searches that axis to a finite boundary where no time scale could.

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/e2e/cli_support.hpp"

namespace {

using namespace cli_test;

const std::string agentic =
  std::string(KVTIER_SOURCE_DIR) + "/tests/sim/trace/data/agentic_subagent.json";

uint64_t requests_of(const fs::path& out) {
  return summary_of(out)["trace"]["requests"].get<uint64_t>();
}

}  // namespace

TEST_CASE("replay: trace.session_copies replays N x the requests, the same for one seed",
          "[sweep][slo][copies]") {
  fs::path one = scratch("copies-1"), a = scratch("copies-a"), b = scratch("copies-b"),
           c = scratch("copies-c");
  const std::string replay = "replay --trace " + agentic + " --quiet --out ";
  const std::string copies = " --set trace.session_copies=5 --set trace.session_shift_s=600";
  REQUIRE(kvtier(replay + one.string()).code == 0);
  auto r = kvtier(replay + a.string() + copies + " --seed 1");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(requests_of(a) == 5 * requests_of(one));
  CHECK(summary_of(a)["requests"]["finished"] == 5 * requests_of(one));
  REQUIRE(kvtier(replay + b.string() + copies + " --seed 1").code == 0);
  CHECK(slurp(a / "requests.csv") == slurp(b / "requests.csv"));
  REQUIRE(kvtier(replay + c.string() + copies + " --seed 2").code == 0);
  CHECK(slurp(a / "requests.csv") != slurp(c / "requests.csv"));
  for (const char* bad : {"0", "4097", "1.5"}) {
    auto o = kvtier(replay + scratch("copies-bad").string() + " --set trace.session_copies=" +
                    bad);
    INFO(o.out);
    CHECK(o.code == 2);
    CHECK(o.out.find("trace.session_copies") != std::string::npos);
  }
  for (const auto& d : {one, a, b, c})
    fs::remove_all(d);
}

TEST_CASE("study: the SLO search on session copies finds a finite boundary",
          "[sweep][slo][copies]") {
  fs::path dir = scratch("slo-copies");
  fs::create_directories(dir);
  fs::path file = dir / "slo-copies.json";
  std::ofstream(file) << R"({
    "description": "agentic load by copies",
    "traces": {"agentic": [")" << agentic << R"("]},
    "set": {"trace.session_shift_s": 1, "slo.ttft_p99_ms": 50, "slo.tpot_p99_ms": 1000},
    "grid": [{"key": "cache.write_policy", "values": ["write_through"]}],
    "search": {"agentic": {"axis": "trace.session_copies", "start": 2}},
    "mode": "full"
  })";
  fs::path out = dir / "out";
  auto r = kvtier("study " + file.string() + " --jobs 2 --out " + out.string());
  INFO(r.out);
  REQUIRE(r.code == 0);
  json slo = json::parse(slurp(out / "slo.json"));
  REQUIRE(slo["rows"].size() == 1);
  const json& row = slo["rows"][0];
  CHECK(row["search_axis"] == "trace.session_copies");
  CHECK(row["outcome"] == "bracketed");
  double sustained = row["sustained_rate_x"].get<double>();
  CHECK(sustained >= 1);
  CHECK(sustained < 4096);
  CHECK(row["session_copies"].get<double>() == sustained);
  CHECK(row["failing_rate_x"].get<double>() > sustained);
  CHECK(r.out.find("x the recorded sessions") != std::string::npos);
  // A search for a trace set the study lacks, or on an axis no search moves: exit 2, named.
  for (const auto& [search, named] :
       std::vector<std::pair<std::string, std::string>>{
         {R"({"chat": {"axis": "trace.session_copies"}})", "search.chat"},
         {R"({"agentic": {"axis": "cache.host_tokens"}})", "search.agentic.axis"},
         {R"({"agentic": {"axis": "trace.session_copies", "start": 2.5}})",
          "search.agentic.start"}}) {
    fs::path bad = dir / "bad.json";
    std::ofstream(bad) << R"({"traces": {"agentic": [")" << agentic
                       << R"("]}, "mode": "full", "search": )" << search << "}";
    auto o = kvtier("study " + bad.string() + " --out " + (dir / "bad").string());
    INFO(o.out);
    CHECK(o.code == 2);
    CHECK(o.out.find(named) != std::string::npos);
  }
  fs::remove_all(dir);
}
