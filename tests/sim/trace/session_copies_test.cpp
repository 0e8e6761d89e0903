// Session copies (sim/trace/session_copies.hpp, docs/traces.md "Workload variants"): N copies of
// a file replay N times its requests, each copy with block ids and sessions of its own (its
// sub-agents still follow its own conversation), and a seed spreads the copies' starts the same
// way every time.

#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "sim/trace/session_copies.hpp"
#include "sim/trace/workload_variant.hpp"
#include "trace_test_util.hpp"

using namespace kvtier;

namespace {

const std::string agentic = std::string(KVTIER_TRACE_DATA) + "/agentic_subagent.json";

std::vector<trace_request> read_copies(uint32_t copies, const workload_variant& v) {
  std::vector<std::unique_ptr<trace_source>> sources;
  for (uint32_t copy = 0; copy < copies; ++copy)
    sources.push_back(vary_workload(
      session_copy(open_trace(agentic, trace_format::agentic, 0, {}), copy), 0, v, copy));
  trace_merger merger(std::move(sources));
  std::vector<trace_request> all;
  trace_request r;
  while (merger.next(r))
    all.push_back(r);
  return all;
}

std::vector<std::pair<uint64_t, int64_t>> sessions_and_arrivals(
  const std::vector<trace_request>& a) {
  std::vector<std::pair<uint64_t, int64_t>> out;
  for (const auto& r : a)
    out.emplace_back(r.session, r.arrival_ns);
  return out;
}

}  // namespace

TEST_CASE("session copies: N x the requests, each copy its own blocks and sessions",
          "[trace][variant][copies]") {
  workload_variant none;
  auto one = read_copies(1, none);
  REQUIRE(one.size() > 2);
  auto three = read_copies(3, none);
  REQUIRE(three.size() == 3 * one.size());
  std::set<uint64_t> original_sessions, original_spaces;
  for (const auto& r : one) {
    original_sessions.insert(r.session);
    if (!r.ids.empty())  // a request without ids has no prefix to share: no space matters
      original_spaces.insert(r.id_space);
  }
  REQUIRE(!original_spaces.empty());
  // Each copy: the original's sessions and id spaces, moved to values no other copy has; a
  // sub-agent's parent is a session of its own copy.
  std::map<uint64_t, std::set<uint64_t>> sessions_by_copy, spaces_by_copy;
  for (const auto& r : three) {
    uint64_t copy = r.session >> 48;
    sessions_by_copy[copy].insert(r.session);
    if (!r.ids.empty())
      spaces_by_copy[copy].insert(r.id_space);
    if (r.parent_session != 0)
      CHECK(r.parent_session >> 48 == copy);
  }
  REQUIRE(sessions_by_copy.size() == 3);
  CHECK(sessions_by_copy[0] == original_sessions);
  CHECK(spaces_by_copy[0] == original_spaces);
  for (uint64_t a = 0; a < 3; ++a) {
    CHECK(sessions_by_copy[a].size() == original_sessions.size());
    CHECK(spaces_by_copy[a].size() == original_spaces.size());
    for (uint64_t b = a + 1; b < 3; ++b)
      for (uint64_t space : spaces_by_copy[a])
        CHECK(spaces_by_copy[b].count(space) == 0);
  }
  // Without a variant the copies start together, as recorded.
  for (size_t i = 0; i < one.size(); ++i)
    CHECK(three[3 * i].arrival_ns == one[i].arrival_ns);
}

TEST_CASE("session copies: a seed spreads the copies' starts, the same way every time",
          "[trace][variant][copies]") {
  workload_variant v;
  v.session_shift_s = 600;
  v.seed = 1;
  auto a = read_copies(4, v);
  REQUIRE(a.size() == 4 * read_copies(1, workload_variant{}).size());
  for (size_t i = 1; i < a.size(); ++i)
    CHECK(a[i - 1].arrival_ns <= a[i].arrival_ns);
  std::map<uint64_t, int64_t> first_arrival;  // per copy
  for (const auto& r : a)
    first_arrival.emplace(r.session >> 48, r.arrival_ns);
  std::set<int64_t> starts;
  for (const auto& [copy, t] : first_arrival)
    starts.insert(t);
  CHECK(starts.size() == 4);  // every copy shifted by a draw of its own
  CHECK(sessions_and_arrivals(read_copies(4, v)) == sessions_and_arrivals(a));
  v.seed = 2;
  CHECK(sessions_and_arrivals(read_copies(4, v)) != sessions_and_arrivals(a));
}
