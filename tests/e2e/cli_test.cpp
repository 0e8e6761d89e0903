// The kvtier command line as users run it: exit codes, messages, outputs.

#include <catch2/catch.hpp>

#include "cli_support.hpp"

using namespace cli_test;

TEST_CASE("cli: a hit-rate replay worked out by hand", "[cli]") {
  // Three 512-token device blocks, LRU over leaves. R1 [0,1,2] misses; R2 [0,1,3] hits 0,1 and
  // evicts leaf 2; R3 [0,1,2] hits 0,1 and evicts 3; R4 [4] misses and evicts 2. Every block is
  // full (a partial one would be no block).
  fs::path out = scratch("small");
  auto r = kvtier("replay --mode hitrate --trace " + data + "/hitrate_small.jsonl --out " +
                  out.string() + " --set cache.block_size=512 --set cache.device_blocks=3 " +
                  "--set cache.host_tokens=0 --set storage.capacity_tokens=0 --check-every 1");
  INFO(r.out);
  REQUIRE(r.code == 0);
  json s = summary_of(out);
  CHECK(s["mode"] == "hitrate");
  CHECK(s["trace"]["requests"] == 4);
  CHECK(s["trace"]["blocks"] == 10);
  CHECK(s["hit_ratio"]["blocks"].get<double>() == Approx(0.4));
  CHECK(s["hit_ratio"]["tokens"].get<double>() == Approx(2048.0 / 5120.0).epsilon(1e-5));
  CHECK(s["hit_ratio"]["by_tier"]["device"]["blocks"].get<double>() == Approx(0.4));
  CHECK(s["hit_ratio"]["by_tier"]["host"]["blocks"] == 0);
  CHECK(s["evictions"]["device"] == 3);
  CHECK(s["invariants"]["violations"] == 0);
  CHECK(s["invariants"]["passes"] == 5);
  CHECK(s["config"]["cache"]["block_size"] == 512);
  std::string csv = slurp(out / "requests.csv");
  CHECK(csv.find("seq,file,line,arrival_s,") == 0);
  CHECK(csv.find("\n1,0,2,1.000000,1536,10,3,2,0,0,1024,0,0,0\n") != std::string::npos);
  fs::remove_all(out);
}

TEST_CASE("cli: replays are byte-identical across runs", "[cli][determinism]") {
  for (std::string mode : {"hitrate", "full"}) {
    fs::path a = scratch("det-a-" + mode), b = scratch("det-b-" + mode);
    auto ra = kvtier("replay --deterministic --quiet --mode " + mode + " --out " + a.string());
    auto rb = kvtier("replay --deterministic --quiet --mode " + mode + " --out " + b.string());
    INFO(mode << ": " << ra.out << rb.out);
    REQUIRE(ra.code == 0);
    REQUIRE(rb.code == 0);
    CHECK(slurp(a / "summary.json") == slurp(b / "summary.json"));
    CHECK(slurp(a / "requests.csv") == slurp(b / "requests.csv"));
    CHECK(slurp(a / "summary.json").size() > 1000);
    fs::remove_all(a);
    fs::remove_all(b);
  }
}

TEST_CASE("cli: a bad trace line stops the run with file, line and field", "[cli][bad_input]") {
  fs::path out = scratch("bad");
  fs::create_directories(out);
  { std::ofstream(out / "summary.json") << "previous"; }
  auto r = kvtier("replay --mode hitrate --trace " + data + "/bad_line.jsonl --out " + out.string());
  CHECK(r.code == 2);
  CHECK(r.out.find("bad_line.jsonl:2") != std::string::npos);
  CHECK(r.out.find("hash_ids") != std::string::npos);
  // Outputs are written atomically: the earlier one is untouched and nothing is left half-done.
  CHECK(slurp(out / "summary.json") == "previous");
  CHECK_FALSE(fs::exists(out / "requests.csv"));
  for (const auto& e : fs::directory_iterator(out))
    CHECK(e.path().filename().string().find(".tmp.") == std::string::npos);
  // With --skip-bad-lines the line is skipped, counted and reported.
  auto skip = kvtier("replay --mode hitrate --skip-bad-lines --trace " + data +
                     "/bad_line.jsonl --out " + out.string());
  INFO(skip.out);
  CHECK(skip.code == 0);
  CHECK(skip.out.find("kvtier: skipped") != std::string::npos);
  CHECK(skip.out.find("bad_line.jsonl:2") != std::string::npos);
  json s = summary_of(out);
  CHECK(s["trace"]["skipped_lines"] == 1);
  CHECK(s["trace"]["requests"] == 2);
  fs::remove_all(out);
}

TEST_CASE("cli: bad config and options are errors that say what is valid", "[cli][bad_input]") {
  auto unknown = kvtier("replay --set cache.blok_size=16 --out /nonexistent/x");
  CHECK(unknown.code == 2);
  CHECK(unknown.out.find("unknown config key 'cache.blok_size'") != std::string::npos);
  CHECK(unknown.out.find("cache.block_size") != std::string::npos);
  auto value = kvtier("replay --set cache.write_policy=sometimes");
  CHECK(value.code == 2);
  CHECK(value.out.find("one of write_through, write_through_selective, write_back") !=
        std::string::npos);
  auto mapping = kvtier("replay --mode hitrate --set cache.block_size=96 --out " +
                        scratch("map").string());
  CHECK(mapping.code == 2);
  CHECK(mapping.out.find("cannot map") != std::string::npos);
  auto missing = kvtier("replay --trace /nonexistent/trace.jsonl");
  CHECK(missing.code == 2);
  CHECK(missing.out.find("/nonexistent/trace.jsonl") != std::string::npos);
  auto folder = kvtier("replay --trace " + data);
  CHECK(folder.code == 2);
  CHECK(folder.out.find("is a directory") != std::string::npos);
  CHECK(kvtier("replay --no-such-flag").code == 2);
  auto help = kvtier("replay --help");
  CHECK(help.code == 0);
  CHECK(help.out.find("--trace") != std::string::npos);
  auto config = kvtier("config --set cache.block_size=16");
  CHECK(config.code == 0);
  CHECK(config.out.find("\"block_size\": 16") != std::string::npos);
}

TEST_CASE("cli: reference hit ratios of the Mooncake traces", "[cli][real_traces]") {
  // Only full blocks are named (docs/design.md, "Hit ratio"): a prompt's partial last block is
  // neither a hit nor in the block total, so the token ratio depends on the block size.
  struct expected {
    const char* file;
    double blocks512, tokens512, tokens64;
  };
  for (auto e : {expected{"synthetic_trace.jsonl", 0.6594, 0.6504, 0.6511},
                 expected{"conversation_trace.jsonl", 0.3819, 0.3734, 0.3736}}) {
    fs::path out = scratch("ref");
    for (int bs : {512, 64}) {
      auto r = kvtier("replay --mode hitrate --quiet --trace " + shared + e.file + " --out " +
                      out.string() + " --set cache.device_tokens=1e9 --set cache.host_tokens=0 " +
                      "--set storage.capacity_tokens=0 --set cache.block_size=" +
                      std::to_string(bs));
      INFO(e.file << " " << bs << " " << r.out);
      REQUIRE(r.code == 0);
      json s = summary_of(out);
      double tokens = bs == 512 ? e.tokens512 : e.tokens64;
      CHECK(s["hit_ratio"]["tokens"].get<double>() == Approx(tokens).margin(5e-5));
      if (bs == 512)
        CHECK(s["hit_ratio"]["blocks"].get<double>() == Approx(e.blocks512).margin(5e-5));
      CHECK(s["invariants"]["violations"] == 0);
    }
    fs::remove_all(out);
  }
}

TEST_CASE("cli: the default replay is a load one instance sustains and an overloaded run says so",
          "[cli][load]") {
  fs::path out = scratch("default");
  auto r = kvtier("replay --out " + out.string());
  INFO(r.out);
  REQUIRE(r.code == 0);
  json s = summary_of(out);
  CHECK(s["config"]["trace"]["time_scale"] == 8);  // the sample's own time scale
  CHECK(s["load"]["overloaded"] == false);
  CHECK(s["latency_ms"]["ttft"]["p50"].get<double>() < 10000);  // seconds, not minutes
  CHECK(r.out.find("OVERLOADED") == std::string::npos);
  // As recorded, the sample is a whole cluster's traffic: the queue grows through the run.
  auto o = kvtier("replay --set trace.time_scale=1 --out " + out.string());
  REQUIRE(o.code == 0);
  CHECK(o.out.find("OVERLOADED") != std::string::npos);
  json so = summary_of(out);
  CHECK(so["load"]["overloaded"] == true);
  CHECK(so["load"]["queue_wait_s_by_quarter"][3].get<double>() >
        so["load"]["queue_wait_s_by_quarter"][0].get<double>() + 60);
  fs::remove_all(out);
}

TEST_CASE("cli: --print-plan prints the deployment with every key's source, and replays nothing",
          "[cli][plan]") {
  fs::path out = scratch("plan");
  auto r = kvtier("replay --print-plan --out " + out.string() +
                  " --set cache.block_size=32 --set "
                  "'cluster.instances=[{\"role\":\"prefill\"},{\"role\":\"decode\","
                  "\"overrides\":{\"cache.device_blocks\":100}}]'");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK_FALSE(fs::exists(out));
  json p = json::parse(r.out);
  REQUIRE(p["instances"].size() == 2);
  CHECK(p["instances"][0]["name"] == "prefill-0");
  CHECK(p["instances"][1]["role"] == "decode");
  CHECK(p["instances"][1]["device_blocks"] == 100);
  CHECK(p["instances"][1]["overrides"]["cache.device_blocks"]["source"] == "cluster override");
  CHECK(p["disaggregated"] == true);
  CHECK(p["storage"]["backend"] == "model");
  CHECK(p["keys"]["cache.block_size"]["source"] == "set");
  CHECK(p["keys"]["cache.block_size"]["value"] == 32);
  CHECK(p["keys"]["cache.write_policy"]["source"] == "default");
  // A plan that cannot be made is bad input, as a replay of it would be.
  auto bad = kvtier("replay --print-plan --set 'cluster.instances=[{\"role\":\"prefill\"}]'");
  CHECK(bad.code == 2);
  CHECK(bad.out.find("cluster.instances") != std::string::npos);
}
