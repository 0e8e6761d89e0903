// Every result names the build that made it (docs/outputs.md, "Provenance"): --version, the
// summary's `kvtier` object, and a sweep folder that never mixes the cells of two builds.

#include <catch2/catch.hpp>

#include "cli_support.hpp"

using namespace cli_test;

namespace {

// Rewrites the build a sweep folder's plan and cells name, as if another binary had made them.
void pretend_other_build(const fs::path& dir) {
  json plan = json::parse(slurp(dir / "plan.json"));
  plan["kvtier"]["commit"] = "0123456789ab";
  std::ofstream(dir / "plan.json") << plan.dump(2);
  for (const auto& e : fs::directory_iterator(dir / "cells")) {
    json cell = json::parse(slurp(e.path() / "cell.json"));
    cell["kvtier"] = "0.0.0+0123456789ab";
    std::ofstream(e.path() / "cell.json") << cell.dump(2);
  }
}

}  // namespace

TEST_CASE("e2e: --version names the build, and summary.json carries the same fields",
          "[cli][provenance]") {
  auto v = kvtier("--version");
  REQUIRE(v.code == 0);
  INFO(v.out);
  CHECK(v.out.rfind("kvtier ", 0) == 0);
  CHECK(v.out.find("commit ") != std::string::npos);
  CHECK(v.out.find("CUDA ") != std::string::npos);
  fs::path out = scratch("provenance");
  REQUIRE(kvtier("replay --deterministic --quiet --mode hitrate --out " + out.string()).code == 0);
  json k = summary_of(out)["kvtier"];
  for (const char* field : {"version", "commit", "build_type", "compiler", "cuda"}) {
    INFO(field);
    REQUIRE(k.contains(field));
    CHECK(!k[field].get<std::string>().empty());
  }
  CHECK(v.out == "kvtier " + k["version"].get<std::string>() + " (commit "
                   + k["commit"].get<std::string>() + ", " + k["build_type"].get<std::string>()
                   + ", " + k["compiler"].get<std::string>() + ", CUDA "
                   + k["cuda"].get<std::string>() + ")\n");
  fs::remove_all(out);
}

TEST_CASE("e2e: a sweep folder of another build is run again loudly, never mixed",
          "[cli][sweep][provenance]") {
  fs::path dir = scratch("provenance-sweep");
  const std::string sweep = "sweep --mode hitrate --deterministic --jobs 1 --grid "
                            "cache.host_tokens=100000,200000 --out " + dir.string();
  REQUIRE(kvtier(sweep + " --quiet").code == 0);
  CHECK(slurp(dir / "results.csv").find("kvtier.commit") != std::string::npos);
  CHECK(json::parse(slurp(dir / "plan.json")).contains("kvtier"));
  pretend_other_build(dir);
  std::string cell = slurp(dir / "cells.txt").substr(0, 16);
  auto refused = kvtier("sweep --out " + dir.string() + " --cell " + cell);
  INFO(refused.out);
  CHECK(refused.code == 2);
  CHECK(refused.out.find("never mixes builds") != std::string::npos);
  auto again = kvtier(sweep);
  INFO(again.out);
  REQUIRE(again.code == 0);
  CHECK(again.out.find("WARNING") != std::string::npos);
  CHECK(again.out.find("0 already done, 2 run") != std::string::npos);
  fs::remove_all(dir);
}
