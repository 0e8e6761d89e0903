// Workload variants (sim/trace/workload_variant.hpp, docs/traces.md "Workload variants"): a
// seed draws the same variant every time, different seeds draw different ones, arrivals stay
// in order, and sessions move whole.

#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "sim/trace/workload_variant.hpp"
#include "trace_test_util.hpp"

using namespace kvtier;
using namespace kvtier::test;

namespace {

std::string mooncake_lines(int n) {
  std::string text;
  for (int i = 0; i < n; ++i)
    text += R"({"timestamp": )" + std::to_string(i / 10 * 3000) +
            R"(, "input_length": 512, "output_length": 1, "hash_ids": [)" + std::to_string(i) +
            "]}\n";
  return text;
}

std::vector<trace_request> read_all(const std::string& path, trace_format format,
                                    const workload_variant& v) {
  auto source = vary_workload(open_trace(path, format, 0, {}), 0, v);
  std::vector<trace_request> all;
  trace_request r;
  while (source->next(r))
    all.push_back(r);
  return all;
}

std::vector<std::pair<uint64_t, int64_t>> lines_and_arrivals(const std::vector<trace_request>& a) {
  std::vector<std::pair<uint64_t, int64_t>> out;
  for (const auto& r : a)
    out.emplace_back(r.line, r.arrival_ns);
  return out;
}

}  // namespace

TEST_CASE("workload variant: seeded sub-sampling and jitter, arrivals in order",
          "[trace][variant]") {
  temp_trace t(mooncake_lines(1000));
  workload_variant none;
  CHECK(read_all(t.path(), trace_format::mooncake, none).size() == 1000);
  workload_variant v;
  v.sample_fraction = 0.5;
  v.arrival_jitter_s = 10;
  v.seed = 1;
  auto a = read_all(t.path(), trace_format::mooncake, v);
  CHECK(a.size() > 420);
  CHECK(a.size() < 580);
  for (size_t i = 1; i < a.size(); ++i)
    CHECK(a[i - 1].arrival_ns <= a[i].arrival_ns);
  // Each kept request moved later by less than the jitter, and some moved past others.
  bool reordered = false;
  for (size_t i = 0; i < a.size(); ++i) {
    int64_t recorded = static_cast<int64_t>((a[i].line - 1) / 10) * 3'000'000'000;
    CHECK(a[i].arrival_ns >= recorded);
    CHECK(a[i].arrival_ns < recorded + 10'000'000'000);
    reordered = reordered || (i > 0 && a[i].line < a[i - 1].line);
  }
  CHECK(reordered);
  CHECK(lines_and_arrivals(read_all(t.path(), trace_format::mooncake, v)) ==
        lines_and_arrivals(a));
  v.seed = 2;
  CHECK(lines_and_arrivals(read_all(t.path(), trace_format::mooncake, v)) !=
        lines_and_arrivals(a));
}

TEST_CASE("workload variant: a session and its sub-agents move and are kept together",
          "[trace][variant]") {
  std::string path = std::string(KVTIER_TRACE_DATA) + "/agentic_subagent.json";
  workload_variant none;
  auto recorded = read_all(path, trace_format::agentic, none);
  REQUIRE(recorded.size() > 2);
  std::set<uint64_t> sessions;
  for (const auto& r : recorded)
    sessions.insert(r.session);
  REQUIRE(sessions.size() > 1);  // a main conversation and a sub-agent
  workload_variant v;
  v.session_shift_s = 600;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    v.seed = seed;
    auto shifted = read_all(path, trace_format::agentic, v);
    REQUIRE(shifted.size() == recorded.size());
    std::map<uint64_t, int64_t> shift_of_line;
    for (const auto& r : recorded)
      shift_of_line[r.line] = -r.arrival_ns;
    for (const auto& r : shifted)
      shift_of_line[r.line] += r.arrival_ns;
    std::set<int64_t> shifts;
    for (const auto& [line, shift] : shift_of_line)
      shifts.insert(shift);
    CHECK(shifts.size() == 1);  // one offset for the whole conversation
    CHECK(*shifts.begin() >= 0);
    CHECK(*shifts.begin() < 600'000'000'000);
  }
  v.session_shift_s = 0;
  v.sample_fraction = 0.5;
  size_t kept_whole = 0, dropped_whole = 0;
  for (uint64_t seed = 1; seed <= 16; ++seed) {
    v.seed = seed;
    size_t n = read_all(path, trace_format::agentic, v).size();
    CHECK((n == 0 || n == recorded.size()));
    (n == 0 ? dropped_whole : kept_whole) += 1;
  }
  CHECK(kept_whole > 0);
  CHECK(dropped_whole > 0);
}
