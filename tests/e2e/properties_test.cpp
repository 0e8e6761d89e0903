// Metamorphic and differential properties of the two replays, swarm style: each seed draws a
// configuration (tests/e2e/property_support.hpp) and the test runs the built binary on the
// bundled sample trace. Every failure prints its seed and the `kvtier replay` command line that
// reproduces it; KVTIER_PROPERTY_SEEDS=N reruns one seed. The properties are those of
// docs/design.md ("Hit ratio", "Write policies") that hold whatever the configuration.

#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "property_support.hpp"
#include "tests/summary_durations.hpp"

using namespace cli_test;

namespace {

double ratio_of(const json& s) {
  return s["hit_ratio"]["tokens"].get<double>();
}

uint64_t block_bytes_of(const json& s) {
  const json& m = s["config"]["model"];
  const std::string dtype = m["kv_dtype"].get<std::string>();
  uint64_t bytes = dtype == "fp32" ? 4 : dtype == "fp8" ? 1 : 2;
  return 2 * bytes * m["layers"].get<uint64_t>() * m["kv_heads"].get<uint64_t>()
         * m["head_dim"].get<uint64_t>() * s["config"]["cache"]["block_size"].get<uint64_t>();
}

uint64_t link_bytes(const json& s, const std::string& prefix) {
  uint64_t sum = 0;
  for (const json& l : s["traffic"]["links"])
    if (l["name"].get<std::string>().rfind(prefix, 0) == 0)
      sum += l["bytes"].get<uint64_t>();
  return sum;
}

// The per-tier ratios are rounded to 6 decimals each, so their sum may differ by 1.5e-6.
void check_tiers_sum(const json& s) {
  double sum = 0;
  uint64_t hits = 0;
  for (const char* t : {"device", "host", "storage"}) {
    sum += s["hit_ratio"]["by_tier"][t]["tokens"].get<double>();
    hits += s["hits"]["tokens"][t].get<uint64_t>();
  }
  CHECK(sum == Approx(ratio_of(s)).margin(2e-6));
  double whole = s["mode"] == "full" ? s["requests"]["finished_input_tokens"].get<double>()
                                     : s["trace"]["input_tokens"].get<double>();
  CHECK(ratio_of(s) == Approx(static_cast<double>(hits) / whole).margin(1e-6));
}

}  // namespace

TEST_CASE("property: per-tier hit ratios sum to the total in both modes, and no duration is negative",
          "[cli][property]") {
  for (uint64_t seed : property_seeds(10)) {
    swarm_case c = draw_case(seed);
    INFO("seed " << seed);
    for (std::string mode : {"hitrate", "full"}) {
      property_run r = replay_run("tiers-" + mode, " --mode " + mode + c.sets);
      INFO("reproduce: " << r.command);
      check_tiers_sum(r.summary);
      CHECK(kvtier::test::negative_durations(r.summary) == std::vector<std::string>{});
      fs::remove_all(r.out);
    }
  }
}

TEST_CASE("property: every link's bytes are the sum of its copies, each counted once",
          "[cli][property]") {
  for (uint64_t seed : property_seeds(10)) {
    swarm_case c = draw_case(seed);
    INFO("seed " << seed);
    property_run r = replay_run("links", c.sets);
    INFO("reproduce: " << r.command);
    const json& s = r.summary;
    const json& x = s["transfers"];
    const json& pool = s["storage"]["pool"];
    uint64_t bb = block_bytes_of(s);
    uint64_t h2d = link_bytes(s, "h2d"), d2h = link_bytes(s, "d2h");
    CHECK(h2d == s["traffic"]["h2d_bytes"].get<uint64_t>());
    CHECK(d2h == s["traffic"]["d2h_bytes"].get<uint64_t>());
    CHECK(h2d == x["swap_ins"].get<uint64_t>() * bb);
    CHECK(d2h == (x["backups"].get<uint64_t>() + x["write_backs"].get<uint64_t>()) * bb);
    CHECK(link_bytes(s, "pcie_duplex") == h2d + d2h);
    uint64_t read = link_bytes(s, "storage0.read");
    if (s["config"]["storage"]["nodes"].get<uint64_t>() == 1) {  // the drawn configurations
      CHECK(read == s["traffic"]["storage_read_bytes"].get<uint64_t>());
      CHECK(read == x["storage_loads"].get<uint64_t>() * bb);
      uint64_t written = x["storage_stores"].get<uint64_t>() - pool["put_present"].get<uint64_t>()
                         - pool["put_in_flight"].get<uint64_t>()
                         - s["storage"]["puts_dropped"].get<uint64_t>();
      CHECK(link_bytes(s, "storage0.write") == written * bb);
    }
    CHECK(s["traffic"]["storage_write_bytes"].get<uint64_t>()
          == x["storage_stores"].get<uint64_t>() * bb);
    fs::remove_all(r.out);
  }
}

TEST_CASE("property: the two modes agree exactly with unbounded tiers and one request at a "
          "time, whatever the policies", "[cli][property][differential]") {
  // The condition of tests/e2e/modes_agree_test.cpp, laid over each drawn configuration.
  const std::string unbounded = " --set scheduler.max_num_seqs=1 --set cache.device_tokens=1e9"
                                " --set cache.host_tokens=1e9";
  for (uint64_t seed : property_seeds(8)) {
    swarm_case c = draw_case(seed);
    INFO("seed " << seed);
    property_run h = replay_run("agree-h", " --mode hitrate" + c.sets + unbounded);
    property_run f = replay_run("agree-f", " --mode full" + c.sets + unbounded);
    INFO("hitrate: " << h.command << "\nfull: " << f.command);
    CHECK(h.summary["hit_ratio"] == f.summary["hit_ratio"]);
    CHECK(h.summary["hits"] == f.summary["hits"]);
    fs::remove_all(h.out);
    fs::remove_all(f.out);
  }
}

TEST_CASE("property: a policy that writes nothing to storage gets no storage hits",
          "[cli][property]") {
  for (uint64_t seed : property_seeds(10)) {
    swarm_case c = draw_case(seed);
    INFO("seed " << seed);
    for (std::string mode : {"hitrate", "full"}) {
      property_run r = replay_run("no-storage-" + mode, " --mode " + mode + c.sets
                                                          + " --set cache.storage_write=never");
      INFO("reproduce: " << r.command);
      CHECK(r.summary["hits"]["tokens"]["storage"] == 0);
      CHECK(r.summary["hit_ratio"]["by_tier"]["storage"]["tokens"] == 0.0);
      fs::remove_all(r.out);
    }
  }
}

// Seed 18 is write_back with a host tier smaller than one request's write-backs: the hit-rate
// replay streams them through the host chunk by chunk (docs/design.md, "Hit ratio").
TEST_CASE("property: in hit-rate mode a larger device or host never lowers the hit ratio",
          "[cli][property][metamorphic]") {
  for (uint64_t seed : property_seeds(30)) {
    swarm_case c = draw_case(seed);
    INFO("seed " << seed);
    property_run base = replay_run("mono-h", " --mode hitrate" + c.sets);
    const json& cache = base.summary["config"]["cache"];
    uint64_t device = cache["device_tokens"].get<uint64_t>();
    uint64_t host = cache["host_tokens"].get<uint64_t>();
    for (std::string larger : {" --set cache.device_tokens=" + std::to_string(device * 2),
                               " --set cache.host_tokens=" + std::to_string(host * 2 + 100000)}) {
      property_run big = replay_run("mono-h-big", " --mode hitrate" + c.sets + larger);
      INFO("smaller: " << base.command << "\nlarger: " << big.command);
      CHECK(ratio_of(big.summary) >= ratio_of(base.summary));
      CHECK(big.summary["hit_ratio"]["blocks"] >= base.summary["hit_ratio"]["blocks"]);
      fs::remove_all(big.out);
    }
    fs::remove_all(base.out);
  }
}

namespace {

// A load the instance sustains serves every request of the trace (none rejected as longer than
// the device, none unfinished) without a growing queue (docs/design.md, "Hit ratio"). A device
// that rejects requests a larger one serves takes its ratio over fewer, different requests: the
// two ratios are not comparable (see the next test).
bool sustained(const json& s) {
  return s["requests"]["rejected"].get<uint64_t>() == 0
         && s["requests"]["unfinished"].get<uint64_t>() == 0
         && !s["load"]["overloaded"].get<bool>();
}

// Hits at each finished request's first admission, and their prompts, over the requests `keep`
// names (requests.csv's `seq`).
std::pair<uint64_t, uint64_t> first_hits_over(const fs::path& csv,
                                              const std::set<std::string>& keep) {
  uint64_t hits = 0, prompt = 0;
  for (const auto& row : read_requests(csv))
    if (keep.count(row.at("seq"))) {
      hits += u64_of(row, "first_hit_tokens");
      prompt += u64_of(row, "input_tokens");
    }
  return {hits, prompt};
}

std::set<std::string> finished_seqs(const fs::path& csv) {
  std::set<std::string> out;
  for (const auto& row : read_requests(csv))
    if (!row.at("finish_s").empty())
      out.insert(row.at("seq"));
  return out;
}

}  // namespace

TEST_CASE("property: in full mode at a sustainable load a larger device or host lowers the hit "
          "ratio by at most 0.005", "[cli][property][metamorphic]") {
  const double tolerance = 0.005;  // absolute (docs/design.md, "Hit ratio")
  size_t cases = 0, compared = 0;
  for (uint64_t seed : property_seeds(8)) {
    swarm_case c = draw_case(seed);
    INFO("seed " << seed);
    property_run base = replay_run("mono-f", c.sets);
    const json& cache = base.summary["config"]["cache"];
    uint64_t device = cache["device_tokens"].get<uint64_t>();
    uint64_t host = cache["host_tokens"].get<uint64_t>();
    for (std::string larger : {" --set cache.device_tokens=" + std::to_string(device * 2),
                               " --set cache.host_tokens=" + std::to_string(host * 2 + 100000)}) {
      property_run big = replay_run("mono-f-big", c.sets + larger);
      INFO("smaller: " << base.command << "\nlarger: " << big.command);
      ++cases;
      if (sustained(base.summary) && sustained(big.summary)) {
        CHECK(ratio_of(big.summary) >= ratio_of(base.summary) - tolerance);
        ++compared;
      }
      fs::remove_all(big.out);
    }
    fs::remove_all(base.out);
  }
  INFO("compared " << compared << " of " << cases);
  CHECK(compared * 2 >= cases);  // seeds 1-8: 10 of 16
}

// Seed 6 of the property: write_back, device 60,000 tokens, host 100,000. The device rejects 20
// requests, 18 of which a device of 120,000 serves, at a hit ratio of 0.056 against the others'
// 0.165: the larger device's ratio falls by 0.025 over what each finishes, but over the requests
// both finish it does not fall past the tolerance (docs/design.md, "Hit ratio"): it fell by 0.002
// (requests running together miss each other) until full hits stopped swapping in and loading
// their last block and a full host tier gave up copies instead of skipping backups; it rises
// now, 0.1687 -> 0.1736.
TEST_CASE("property: a device that rejects requests takes its ratio over fewer of them",
          "[cli][property][metamorphic]") {
  swarm_case c = draw_case(6);
  property_run small = replay_run("rejects-small", c.sets);
  property_run big = replay_run("rejects-big", c.sets + " --set cache.device_tokens=120000");
  INFO("smaller: " << small.command << "\nlarger: " << big.command);
  CHECK(small.summary["requests"]["rejected"].get<uint64_t>() == 20);
  CHECK(big.summary["requests"]["rejected"].get<uint64_t>() == 2);
  CHECK(ratio_of(big.summary) < ratio_of(small.summary) - 0.02);
  std::set<std::string> both = finished_seqs(small.out / "requests.csv");
  REQUIRE(both.size() == 480);
  std::set<std::string> big_finished = finished_seqs(big.out / "requests.csv");
  CHECK(std::includes(big_finished.begin(), big_finished.end(), both.begin(), both.end()));
  auto [small_hits, prompt] = first_hits_over(small.out / "requests.csv", both);
  auto [big_hits, same_prompt] = first_hits_over(big.out / "requests.csv", both);
  REQUIRE(prompt == same_prompt);
  double small_ratio = static_cast<double>(small_hits) / prompt;
  double big_ratio = static_cast<double>(big_hits) / prompt;
  CHECK(small_ratio == Approx(ratio_of(small.summary)).margin(1e-6));
  CHECK(big_ratio >= small_ratio - 0.005);  // never lower by more than the tolerance
  fs::remove_all(small.out);
  fs::remove_all(big.out);
}

// Only full blocks are named, and a full hit's last block counts as computed (docs/design.md,
// "Hit ratio").
TEST_CASE("property: a request's hit tokens and computed tokens add up to its prompt",
          "[cli][property]") {
  for (uint64_t seed : property_seeds(10)) {
    swarm_case c = draw_case(seed);
    INFO("seed " << seed);
    property_run r = replay_run("add-up", c.sets);
    INFO("reproduce: " << r.command);
    size_t checked = 0, wrong = 0;
    std::string first;
    for (const auto& row : read_requests(r.out / "requests.csv")) {
      if (row.at("finish_s").empty() || u64_of(row, "preemptions") > 0)
        continue;  // recomputation after a preemption is computed twice by design
      uint64_t hits = u64_of(row, "device_hit_tokens") + u64_of(row, "host_hit_tokens")
                      + u64_of(row, "storage_hit_tokens");
      ++checked;
      if (hits + u64_of(row, "computed_tokens") != u64_of(row, "input_tokens") && wrong++ == 0)
        first = "request seq " + row.at("seq") + ": hits " + std::to_string(hits)
                + " + computed " + row.at("computed_tokens") + " != prompt "
                + row.at("input_tokens");
    }
    INFO(first);
    CHECK(checked > 0);
    CHECK(wrong == 0);
    fs::remove_all(r.out);
  }
}
