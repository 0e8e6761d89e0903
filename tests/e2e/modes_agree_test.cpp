// The hit-rate replay (sim/hitrate/) and the full replay (the actors) decide admissions with
// two codes, so a differential test states when they must agree and checks it on every public
// trace: with tiers that never evict and one request running at a time (FCFS admission is then
// arrival order, and each request's blocks are cached before the next one is matched), the
// full replay's hits at first admission equal the hit-rate replay's hits at arrival, request by
// request (docs/design.md, "Hit ratio").

#include <map>
#include <sstream>

#include <catch2/catch.hpp>

#include "cli_support.hpp"

using namespace cli_test;

namespace {

const std::string unbounded_one_at_a_time =
  " --set scheduler.max_num_seqs=1 --set cache.device_tokens=1e9 --set cache.host_tokens=1e9";

// requests.csv as (file, line) -> the named columns' values.
using hits_by_request = std::map<std::pair<std::string, std::string>, std::vector<std::string>>;

hits_by_request read_hits(const fs::path& csv) {
  const std::vector<std::string> wanted = {"blocks",           "device_hit_blocks",
                                           "host_hit_blocks",  "storage_hit_blocks",
                                           "device_hit_tokens", "host_hit_tokens",
                                           "storage_hit_tokens"};
  std::istringstream in(slurp(csv));
  std::string line;
  std::getline(in, line);
  auto split = [](const std::string& s) {
    std::vector<std::string> cells;
    std::stringstream ss(s);
    for (std::string c; std::getline(ss, c, ',');)
      cells.push_back(c);
    return cells;
  };
  std::vector<std::string> header = split(line);
  auto column = [&](const std::string& name) {
    for (size_t i = 0; i < header.size(); ++i)
      if (header[i] == name)
        return i;
    FAIL("requests.csv has no column " << name);
    return size_t{0};
  };
  size_t file = column("file"), at = column("line");
  std::vector<size_t> picked;
  for (const auto& w : wanted)
    picked.push_back(column(w));
  hits_by_request out;
  while (std::getline(in, line)) {
    std::vector<std::string> cells = split(line);
    std::vector<std::string> values;
    for (size_t i : picked)
      values.push_back(cells.at(i));
    out[{cells.at(file), cells.at(at)}] = std::move(values);
  }
  return out;
}

struct both {
  json hitrate, full;
  hits_by_request hitrate_requests, full_requests;
};

both replay_both(const std::string& traces, const std::string& sets) {
  both b;
  for (std::string mode : {"hitrate", "full"}) {
    fs::path out = scratch("agree-" + mode);
    auto r = kvtier("replay --deterministic --quiet --mode " + mode + traces + sets + " --out " +
                    out.string());
    INFO(mode << ": " << r.out);
    REQUIRE(r.code == 0);
    (mode == "hitrate" ? b.hitrate : b.full) = summary_of(out);
    (mode == "hitrate" ? b.hitrate_requests : b.full_requests) = read_hits(out / "requests.csv");
    fs::remove_all(out);
  }
  return b;
}

}  // namespace

TEST_CASE("e2e: hit-rate and full replays agree request by request on every public trace",
          "[cli][real_traces][differential]") {
  const std::string traces_dir = std::string(KVTIER_SHARED_DIR) + "/traces/";
  std::string agentic;
  for (const auto& e : fs::directory_iterator(traces_dir + "agentic"))
    if (e.path().extension() == ".json")
      agentic += " --trace " + e.path().string();
  const std::vector<std::pair<std::string, std::string>> cases = {
    {"sample", ""},
    {"mooncake conversation", " --trace " + traces_dir + "mooncake/conversation_trace.jsonl"},
    {"mooncake synthetic", " --trace " + traces_dir + "mooncake/synthetic_trace.jsonl"},
    {"azure code", " --trace " + traces_dir + "azure2023/AzureLLMInferenceTrace_code.csv"},
    {"azure conversation", " --trace " + traces_dir + "azure2023/AzureLLMInferenceTrace_conv.csv"},
    {"agentic (every file)", agentic},
  };
  for (const auto& [name, traces] : cases) {
    INFO(name);
    both b = replay_both(traces, unbounded_one_at_a_time);
    CHECK(b.hitrate["hit_ratio"] == b.full["hit_ratio"]);
    CHECK(b.full["requests"]["unfinished"] == 0);
    REQUIRE(b.hitrate_requests.size() == b.full_requests.size());
    size_t differing = 0;
    for (const auto& [request, values] : b.hitrate_requests) {
      auto it = b.full_requests.find(request);
      differing += it == b.full_requests.end() || it->second != values;
    }
    CHECK(differing == 0);
  }
}

TEST_CASE("e2e: the two replays differ once requests overlap, so the condition is needed",
          "[cli][differential]") {
  // The sample's arrivals come in 3-second ticks: requests of one tick are admitted in one step
  // of the full replay and miss each other's blocks, while the hit-rate replay, one request at a
  // time, finds them. Stretching time does not separate same-instant arrivals.
  both b = replay_both("", " --set trace.time_scale=1000 --set cache.device_tokens=1e9"
                           " --set cache.host_tokens=1e9");
  CHECK(b.hitrate["hit_ratio"]["blocks"].get<double>() >
        b.full["hit_ratio"]["blocks"].get<double>());
}
