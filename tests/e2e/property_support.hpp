#pragma once

// Swarm-style property runs of the built binary (tests/e2e/properties_test.cpp): each seed
// draws a configuration, every run is a `kvtier replay` command line, and a failure prints the
// seed and the command that reproduces it. KVTIER_PROPERTY_SEEDS (`7`, `3,9`, `1-40`) replaces
// a test's seeds, to rerun one that failed.

#include <cstdlib>
#include <map>
#include <random>
#include <sstream>
#include <vector>

#include "cli_support.hpp"

namespace cli_test {

/// One drawn configuration: `--set` options for `kvtier replay`, on the bundled sample trace.
struct swarm_case {
  uint64_t seed = 0;
  std::string sets;
};

inline swarm_case draw_case(uint64_t seed) {
  std::mt19937_64 rng(seed * 2654435761ULL + 17);
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  const char* policies[] = {"write_through", "write_through_selective", "write_back"};
  const char* writes[] = {"always", "on_host_evict", "never"};
  const char* copies[] = {"free_on_swap_in", "keep"};
  const char* evictions[] = {"lru", "lfu"};
  const uint64_t devices[] = {60000, 120000, 250000, 500000};
  const uint64_t hosts[] = {0, 100000, 400000, 1600000};
  const uint64_t storages[] = {0, 300000, 1000000, 50000000};
  uint64_t host = hosts[pick(4)];
  uint64_t storage = storages[pick(4)];
  if (host == 0)
    storage = 0;  // blocks read from storage land in host memory: no pool without a host tier
  std::ostringstream s;
  s << " --set cache.write_policy=" << policies[pick(3)]
    << " --set cache.write_through_threshold=" << 1 + pick(3)
    << " --set cache.write_back_host_copy=" << copies[pick(2)]
    << " --set cache.storage_write=" << writes[pick(3)]
    << " --set cache.eviction=" << evictions[pick(2)]
    << " --set cache.device_tokens=" << devices[pick(4)]
    << " --set cache.host_tokens=" << host << " --set storage.capacity_tokens=" << storage
    << " --set trace.time_scale=" << (pick(2) ? 8 : 16);
  return {seed, s.str()};
}

/// The seeds to run: KVTIER_PROPERTY_SEEDS when set, else 1..count.
inline std::vector<uint64_t> property_seeds(uint64_t count) {
  std::vector<uint64_t> seeds;
  if (const char* env = std::getenv("KVTIER_PROPERTY_SEEDS")) {
    std::stringstream in(env);
    for (std::string part; std::getline(in, part, ',');) {
      size_t dash = part.find('-');
      uint64_t a = std::stoull(part.substr(0, dash));
      uint64_t b = dash == std::string::npos ? a : std::stoull(part.substr(dash + 1));
      for (uint64_t x = a; x <= b; ++x)
        seeds.push_back(x);
    }
    return seeds;
  }
  for (uint64_t x = 1; x <= count; ++x)
    seeds.push_back(x);
  return seeds;
}

struct property_run {
  std::string command;  ///< what reproduces it
  json summary;
  fs::path out;
};

/// Runs `kvtier replay` (deterministic) with these arguments into a scratch folder that the
/// caller removes; fails the test, naming the command, if it does not exit 0.
inline property_run replay_run(const std::string& name, const std::string& args) {
  property_run r;
  r.out = scratch("prop-" + name);
  r.command = binary + " replay --deterministic --quiet" + args + " --out " + r.out.string();
  outcome o = shell_run(r.command);
  INFO("reproduce: " << r.command << "\n" << o.out);
  REQUIRE(o.code == 0);
  r.summary = summary_of(r.out);
  return r;
}

/// requests.csv as rows of column name -> text.
inline std::vector<std::map<std::string, std::string>> read_requests(const fs::path& csv) {
  std::istringstream in(slurp(csv));
  auto split = [](const std::string& line) {
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');)
      cells.push_back(c);
    return cells;
  };
  std::string line;
  std::getline(in, line);
  std::vector<std::string> header = split(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    std::vector<std::string> cells = split(line);
    std::map<std::string, std::string> row;
    for (size_t i = 0; i < header.size() && i < cells.size(); ++i)
      row[header[i]] = cells[i];
    rows.push_back(std::move(row));
  }
  return rows;
}

inline uint64_t u64_of(const std::map<std::string, std::string>& row, const std::string& key) {
  auto it = row.find(key);
  return it == row.end() || it->second.empty() ? 0 : std::stoull(it->second);
}

}  // namespace cli_test
