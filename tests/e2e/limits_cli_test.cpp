// Accepted inputs at the edges: times near the 64-bit limit, configs whose products are absurd,
// the wall clock at high speed, options that must say what they do (--check-every, --seed).

#include "tests/e2e/cli_support.hpp"

using namespace cli_test;

namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace
using nlohmann::json;

namespace {

// Writes `text` to a file in `dir`; returns its path.
std::string write(const fs::path& dir, const std::string& name, const std::string& text) {
  fs::create_directories(dir);
  std::ofstream(dir / name) << text;
  return (dir / name).string();
}

}  // namespace

TEST_CASE("cli: --check-every runs the invariant checks every N commits in full mode",
          "[cli][check_every]") {
  fs::path a = scratch("check-0"), b = scratch("check-1");
  auto plain = kvtier("replay --quiet --out " + a.string());
  auto every = kvtier("replay --quiet --check-every 100 --out " + b.string());
  INFO(plain.out << every.out);
  REQUIRE(plain.code == 0);
  REQUIRE(every.code == 0);
  uint64_t at_end = summary_of(a)["invariants"]["checked"];
  uint64_t each = summary_of(b)["invariants"]["checked"];
  uint64_t steps = summary_of(b)["steps"]["count"];
  // Once at the end, against once more every 100 commits (a commit per step): the sample's
  // 4817 steps make 48 passes more, each about as large as the last one.
  REQUIRE(steps > 1000);
  CHECK(each > 10 * at_end);
  CHECK(summary_of(b)["invariants"]["violations"] == 0);
  fs::remove_all(a);
  fs::remove_all(b);
}

TEST_CASE("cli: a Mooncake timestamp near the 64-bit limit is refused, not wrapped",
          "[cli][time]") {
  fs::path dir = scratch("ts-max");
  std::string trace = write(dir, "t.jsonl",
                            "{\"timestamp\": 9223372036854, \"input_length\": 512, "
                            "\"output_length\": 4, \"hash_ids\": [1]}\n");
  auto r = kvtier("replay --quiet --trace " + trace + " --out " + (dir / "out").string());
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK(contains(r.out, "t.jsonl:1"));
  CHECK(contains(r.out, "timestamp"));
  CHECK(contains(r.out, "trace.time_scale"));
  CHECK_FALSE(fs::exists(dir / "out" / "summary.json"));
  fs::remove_all(dir);
}

TEST_CASE("cli: trace.time_scale that stretches a trace past the limit is refused",
          "[cli][time]") {
  fs::path dir = scratch("scale");
  std::string trace = write(dir, "week.csv",
                            "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                            "2023-11-16 18:17:03.9799600,4808,10\n"
                            "2023-11-23 18:17:03.9799600,3180,8\n");
  auto ok = kvtier("replay --quiet --trace " + trace + " --out " + (dir / "ok").string());
  INFO(ok.out);
  CHECK(ok.code == 0);
  auto r = kvtier("replay --quiet --set trace.time_scale=1e5 --trace " + trace + " --out " +
                  (dir / "out").string());
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK(contains(r.out, "week.csv:3"));
  CHECK(contains(r.out, "TIMESTAMP"));
  CHECK(contains(r.out, "trace.time_scale"));
  fs::remove_all(dir);
}

TEST_CASE("cli: session think times whose sum passes the limit are refused", "[cli][time]") {
  fs::path dir = scratch("think");
  std::string head = "{\"kvtier_trace\": 1, \"block_size\": 16}\n";
  auto turn = [](int n, const char* think) {
    return "{\"arrival_s\": 0, \"input_length\": 16, \"output_length\": 2, \"block_hashes\": [" +
           std::to_string(n + 1) + "], \"session\": 1" +
           (n > 0 ? std::string(", \"think_time_s\": ") + think : std::string()) + "}\n";
  };
  // One think time past the limit a trace may span: refused where it is.
  std::string one = write(dir, "one.jsonl", head + turn(0, "") + turn(1, "5e9"));
  auto r1 = kvtier("replay --quiet --trace " + one + " --out " + (dir / "o1").string());
  INFO(r1.out);
  CHECK(r1.code == 2);
  CHECK(contains(r1.out, "one.jsonl:3"));
  CHECK(contains(r1.out, "think_time_s"));
  // Each within it, their sum past the limit of virtual time: refused as a whole.
  std::string trace = head + turn(0, "");
  for (int n = 1; n <= 8; ++n)
    trace += turn(n, "1e9");
  std::string many = write(dir, "many.jsonl", trace);
  auto r2 = kvtier("replay --quiet --trace " + many + " --out " + (dir / "o2").string());
  INFO(r2.out);
  CHECK(r2.code == 2);
  CHECK(contains(r2.out, "virtual time reached its limit"));
  CHECK_FALSE(fs::exists(dir / "o2" / "summary.json"));
  fs::remove_all(dir);
}

TEST_CASE("cli: a config of in-range keys whose products overflow time is refused",
          "[cli][time][config]") {
  fs::path out = scratch("huge-model");
  auto r = kvtier("replay --quiet --out " + out.string() +
                  " --set model.layers=1024 --set model.kv_heads=1024 --set model.head_dim=4096"
                  " --set cache.block_size=32768 --set links.h2d_gbps=0.001"
                  " --set links.d2h_gbps=0.001 --set cache.device_blocks=4");
  INFO(r.out);
  CHECK(r.code == 2);
  CHECK(contains(r.out, "model.layers x model.kv_heads x model.head_dim"));
  CHECK(contains(r.out, "cache.block_size"));
  // In range per block, but a whole device tier over a 0.001 GB/s link takes years.
  auto slow = kvtier("replay --quiet --out " + out.string() +
                     " --set cache.device_tokens=4e7 --set links.h2d_gbps=0.001"
                     " --set links.duplex_gbps=0.001");
  INFO(slow.out);
  CHECK(slow.code == 2);
  CHECK(contains(slow.out, "links.h2d_gbps"));
  // The longest step: attention over the whole device at the top of its range.
  auto step = kvtier("replay --quiet --out " + out.string() +
                     " --set compute.prefill_attention_ns=1e9");
  INFO(step.out);
  CHECK(step.code == 2);
  CHECK(contains(step.out, "compute."));
  CHECK(contains(step.out, "scheduler.token_budget"));
  CHECK_FALSE(fs::exists(out / "summary.json"));
  fs::remove_all(out);
}

TEST_CASE("cli: without faults --seed says it changes nothing, and no summary claims a seed",
          "[cli][seed]") {
  auto help = kvtier("replay --help");
  CHECK(contains(help.out, "seeded faults"));
  CHECK(contains(help.out, "without a fault configured it changes nothing"));
  fs::path a = scratch("seed-a"), b = scratch("seed-b");
  auto plain = kvtier("replay --quiet --deterministic --out " + a.string());
  auto seeded = kvtier("replay --quiet --deterministic --seed 7 --out " + b.string());
  INFO(plain.out << seeded.out);
  REQUIRE(plain.code == 0);
  REQUIRE(seeded.code == 0);
  CHECK(contains(seeded.out, "--seed changes nothing"));
  CHECK_FALSE(contains(plain.out, "--seed"));
  CHECK(slurp(a / "summary.json") == slurp(b / "summary.json"));
  CHECK_FALSE(summary_of(a).contains("seed"));
  auto hitrate = kvtier("replay --quiet --mode hitrate --out " + a.string());
  REQUIRE(hitrate.code == 0);
  CHECK_FALSE(summary_of(a).contains("seed"));
  fs::remove_all(a);
  fs::remove_all(b);
}

TEST_CASE("cli: --seed draws the seeded handoff failures of a PD deployment", "[cli][seed][pd]") {
  std::string pd = "replay --quiet --deterministic --set trace.time_scale=8 --set "
                   "'cluster.instances=[{\"role\":\"prefill\"},{\"role\":\"decode\"}]' "
                   "--set pd.failure_rate=0.3 --set pd.on_handoff_failure=recompute";
  fs::path a = scratch("pd-seed-a"), b = scratch("pd-seed-b"), c = scratch("pd-seed-c");
  auto one = kvtier(pd + " --seed 1 --out " + a.string());
  auto again = kvtier(pd + " --seed 1 --out " + b.string());
  auto two = kvtier(pd + " --seed 2 --out " + c.string());
  INFO(one.out << two.out);
  REQUIRE(one.code == 0);
  REQUIRE(two.code == 0);
  CHECK_FALSE(contains(one.out, "--seed changes nothing"));
  CHECK(slurp(a / "summary.json") == slurp(b / "summary.json"));
  json x = summary_of(a)["pd"]["failures"];
  CHECK(x["injected"].get<uint64_t>() > 0);
  CHECK(x["injected"] == x["recomputed"]);
  CHECK(slurp(a / "requests.csv") != slurp(c / "requests.csv"));
  CHECK(summary_of(a)["requests"]["failed"] == 0);
  fs::remove_all(a);
  fs::remove_all(b);
  fs::remove_all(c);
}

TEST_CASE("cli: with faults --seed draws them: one seed repeats, another differs",
          "[cli][seed][faults]") {
  const std::string faults = " --set storage.nodes=3 --set faults.node_losses_per_hour=60"
                             " --set faults.get_fail_probability=0.01"
                             " --set faults.put_fail_probability=0.01";
  fs::path a = scratch("fault-a"), b = scratch("fault-b"), c = scratch("fault-c");
  auto one = kvtier("replay --quiet --deterministic --seed 7 --out " + a.string() + faults);
  auto again = kvtier("replay --quiet --deterministic --seed 7 --out " + b.string() + faults);
  auto other = kvtier("replay --quiet --deterministic --seed 8 --out " + c.string() + faults);
  INFO(one.out << other.out);
  REQUIRE(one.code == 0);
  REQUIRE(again.code == 0);
  REQUIRE(other.code == 0);
  CHECK_FALSE(contains(one.out, "changes nothing"));
  CHECK(slurp(a / "summary.json") == slurp(b / "summary.json"));
  CHECK(slurp(a / "requests.csv") == slurp(b / "requests.csv"));
  json fa = summary_of(a)["faults"], fc = summary_of(c)["faults"];
  CHECK(fa["seed"] == 7);
  CHECK(fc["seed"] == 8);
  CHECK(fa["injected"]["node_losses"].get<uint64_t>() > 0);
  CHECK(fa["injected"] != fc["injected"]);
  CHECK(summary_of(a)["invariants"]["violations"] == 0);
  for (const fs::path& p : {a, b, c})
    fs::remove_all(p);
}

TEST_CASE("cli: faults where they cannot apply are refused, naming the key", "[cli][faults]") {
  fs::path out = scratch("fault-refused");
  auto hitrate = kvtier("replay --quiet --mode hitrate --set faults.get_fail_probability=0.1 --out " +
                        out.string());
  CHECK(hitrate.code == 2);
  CHECK(contains(hitrate.out, "faults.*: faults need timing: --mode full"));
  auto wall = kvtier("replay --quiet --clock wall --set faults.node_loss_at_s=1 --out " +
                     out.string());
  CHECK(wall.code == 2);
  CHECK(contains(wall.out, "deterministic in virtual time only"));
  auto node = kvtier("replay --quiet --set faults.node_loss_at_s=1 --set faults.node_loss_node=4"
                     " --out " + out.string());
  CHECK(node.code == 2);
  CHECK(contains(node.out, "faults.node_loss_node: node 4 does not exist: storage.nodes is 1"));
  auto none = kvtier("replay --quiet --set storage.capacity_tokens=0"
                     " --set faults.put_fail_probability=0.5 --out " + out.string());
  CHECK(none.code == 2);
  CHECK(contains(none.out, "there is none"));
  auto bad = kvtier("replay --quiet --set faults.get_fail_probability=2 --out " + out.string());
  CHECK(bad.code == 2);
  CHECK(contains(bad.out, "faults.get_fail_probability"));
  CHECK_FALSE(fs::exists(out / "summary.json"));
  fs::remove_all(out);
}

TEST_CASE("cli: the wall clock at high speed reports and warns how far it fell behind",
          "[cli][wall_clock]") {
  fs::path v = scratch("lag-virtual"), w = scratch("lag-wall");
  auto virt = kvtier("replay --quiet --out " + v.string());
  REQUIRE(virt.code == 0);
  json sv = summary_of(v)["simulation"];
  CHECK(sv["lag_s"] == 0);
  CHECK(sv["lag_share"] == 0);
  CHECK_FALSE(contains(virt.out, "behind"));
  // At 1000x every millisecond of host work is a virtual second.
  auto wall = kvtier("replay --quiet --clock wall --speed 1000 --out " + w.string());
  INFO(wall.out);
  REQUIRE(wall.code == 0);
  json sw = summary_of(w)["simulation"];
  CHECK(sw["lag_s"].get<double>() > 0);
  CHECK(sw["lag_max_ms"].get<double>() > 0);
  CHECK(sw["lag_share"].get<double>() > 0.01);
  CHECK(contains(wall.out, "warning: the replay fell"));
  CHECK(contains(wall.out, "--speed 1000"));
  fs::remove_all(v);
  fs::remove_all(w);
}

// Every request read ends once, as finished, rejected or failed, or stays unfinished: the counts
// add up to trace.requests, on one instance and on 1P+1D where the decode instance rejects
// requests before any prefill (docs/outputs.md, "--mode full").
TEST_CASE("cli: finished + rejected + failed + unfinished = the requests read", "[cli][pd]") {
  const std::string single = " --set cache.device_tokens=30000";
  const std::string pd = " --set storage.nodes=4 --set 'cluster.instances=[{\"role\":\"prefill\"},"
                         "{\"role\":\"decode\",\"overrides\":{\"cache.device_tokens\":100000}}]'";
  for (const std::string& sets : {single, pd}) {
    fs::path out = scratch("request-counts");
    auto r = kvtier("replay --quiet --deterministic --set trace.time_scale=8 --out " + out.string()
                    + sets);
    INFO(sets << '\n' << r.out);
    REQUIRE(r.code == 0);
    json s = summary_of(out);
    const json& q = s["requests"];
    uint64_t read = s["trace"]["files"][0]["requests"].get<uint64_t>();
    CHECK(s["trace"]["requests"].get<uint64_t>() == read);
    uint64_t failed = q.contains("failed") ? q["failed"].get<uint64_t>() : 0;
    CHECK(q["rejected"].get<uint64_t>() > 0);
    CHECK(q["finished"].get<uint64_t>() + q["rejected"].get<uint64_t>() + failed
            + q["unfinished"].get<uint64_t>() == read);
    CHECK(q["unfinished"].get<uint64_t>() <= read);
    CHECK(s["invariants"]["violations"].get<uint64_t>() == 0);
    fs::remove_all(out);
  }
}
