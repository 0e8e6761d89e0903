// The engine session (model/session/) on random sessions, checked step by step against a small,
// separately written reference of the request state machine.

#include <catch2/catch.hpp>

#include <cstddef>
#include <iterator>
#include <optional>
#include <cstdlib>
#include <map>
#include <random>

#include "model/session/engine_session.hpp"
#include "tests/model/session/session_helpers.hpp"

using namespace kvtier;
using namespace kvtier::session;
using kvtier::session::test::checked;
using kvtier::session::test::prompt;

namespace {

// The rules of docs/protocol.md written out again, plainly: states as words, a step applied to
// a copy in the controller's order and kept only when every entry fits.
struct reference_session {
  std::map<uint64_t, std::string> state;  // by the engine's id
  std::map<request_id, uint64_t> engine_of;
  uint64_t last_step = 0;

  bool allocate(uint64_t req, request_id global) {
    if (state.count(req))
      return false;
    state[req] = "loading";
    engine_of[global] = req;
    return true;
  }
  bool loaded(request_id global) {
    auto e = engine_of.find(global);
    if (e == engine_of.end() || state[e->second] != "loading")
      return false;
    state[e->second] = "waiting";
    return true;
  }
  bool step(std::optional<uint64_t> number, const commit& c) {
    if (number && *number <= last_step)
      return false;
    auto s = state;
    auto is = [&](uint64_t r, const char* what) { return s.count(r) && s[r] == what; };
    for (const token_mark& m : c.computed)
      if (!is(m.req, "running"))
        return false;
    for (uint64_t r : c.finished) {
      if (!is(r, "waiting") && !is(r, "running"))
        return false;
      s.erase(r);
    }
    for (const token_mark& m : c.preempted) {
      if (!is(m.req, "running"))
        return false;
      s[m.req] = "waiting";
    }
    for (const token_mark& m : c.grows)
      if (!is(m.req, "running"))
        return false;
    for (const token_mark& m : c.admits) {
      if (!is(m.req, "waiting") || m.tokens == 0)
        return false;
      s[m.req] = "admitting";
    }
    for (auto it = engine_of.begin(); it != engine_of.end();)
      it = s.count(it->second) ? std::next(it) : engine_of.erase(it);
    state = s;
    last_step = number ? *number : last_step + 1;
    return true;
  }
  bool grant(const std::vector<admit_result>& admits) {
    auto s = state;
    for (const admit_result& a : admits) {
      auto e = engine_of.find(a.req);
      if (e == engine_of.end() || s[e->second] != "admitting")
        return false;
      s[e->second] = a.admitted ? "running" : "waiting";
    }
    state = s;
    return true;
  }
};

std::string words(req_state s) { return state_name(s); }

// One seed's random session: allocations, the controller's readies and grants (in any order,
// now and then one naming another request), and steps that mostly name few requests, each
// applied to the session and to the reference.
struct random_session {
  std::mt19937_64 rng;
  engine_session s;
  reference_session ref;
  request_id next_global = 1;
  std::vector<std::pair<engine_step, std::vector<request_id>>> in_flight;  // begun, not granted
  uint64_t accepted = 0, refused = 0, granted = 0, running = 0;

  explicit random_session(uint64_t seed) : rng(seed) {}
  uint64_t pick(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng); }

  void allocate() {
    uint64_t req = pick(8);
    request_id global = next_global++;
    bool ok = !s.allocate(req, global, prompt(1));
    REQUIRE(ok == ref.allocate(req, global));
  }
  void ready() {
    request_id global = 1 + pick(next_global);
    std::vector<parked_call> woken;
    bool ok = !s.loaded({global, 0, 0}, woken);
    REQUIRE(ok == ref.loaded(global));
  }
  std::vector<token_mark> marks() {  // mostly empty: a step that names few requests fits more
    std::vector<token_mark> out(pick(4) == 0 ? 1 + pick(2) : 0);
    for (token_mark& m : out)
      m = {pick(9), static_cast<uint32_t>(pick(6) * 32)};
    return out;
  }
  void step() {
    engine_step es;
    if (pick(3) > 0)  // else a shorthand's: the next number
      es.number = s.last_step() + (pick(8) == 0 ? 0 : 1 + pick(2));
    es.work.computed = marks();
    for (size_t i = pick(4) == 0 ? 1 : 0; i > 0; --i)
      es.work.finished.push_back(pick(9));
    es.work.preempted = marks();
    es.work.grows = marks();
    es.work.admits = marks();
    begun_step b;
    bool ok = !s.begin_step(es, b);
    REQUIRE(ok == ref.step(es.number, es.work));
    (ok ? accepted : refused) += 1;
    if (!ok)
      return;
    std::vector<request_id> admits;
    for (const token_mark& m : b.work.admits)
      admits.push_back(m.req);
    in_flight.emplace_back(es, admits);
  }
  void grant_one() {
    if (in_flight.empty())
      return;
    size_t i = pick(in_flight.size());  // grants may come in any order
    auto [es, admits] = in_flight[i];
    in_flight.erase(in_flight.begin() + static_cast<std::ptrdiff_t>(i));
    grant g;
    for (request_id r : admits)
      g.admits.push_back({r, pick(2) == 0});
    if (pick(10) == 0)  // a forged answer: some other id
      g.admits.push_back({1 + pick(next_global), true});
    settled_step out;
    bool ok = !s.end_step(es, g, out);
    REQUIRE(ok == ref.grant(g.admits));
    granted += ok;
  }
  void check_agree() {
    REQUIRE(s.size() == ref.state.size());
    for (const auto& [req, st] : ref.state) {
      REQUIRE(s.find(req));
      REQUIRE(words(s.find(req)->state) == st);
      running += st == "running";
    }
    invariant_report r = checked(s);
    INFO((r.messages.empty() ? std::string() : r.messages.front()));
    REQUIRE(r.ok());
  }
  void run(int ops) {
    for (int op = 0; op < ops; ++op) {
      uint64_t kind = pick(11);
      if (kind <= 1)
        allocate();
      else if (kind <= 3)
        ready();
      else if (kind <= 8)
        step();
      else
        grant_one();
      check_agree();
    }
  }
};

}  // namespace

TEST_CASE("session: random sessions agree with the reference", "[session][property]") {
  uint64_t first = 1, last = 300;
  if (const char* one = std::getenv("KVTIER_SESSION_SEED"))
    first = last = std::strtoull(one, nullptr, 10);
  uint64_t accepted = 0, refused = 0, granted = 0, running = 0;
  for (uint64_t seed = first; seed <= last; ++seed) {
    INFO("seed " << seed << " failed; rerun it alone: KVTIER_SESSION_SEED=" << seed
                 << " build/tests/kvtier_model_tests \"session: random sessions*\"");
    random_session r(seed);
    r.run(200);
    accepted += r.accepted;
    refused += r.refused;
    granted += r.granted;
    running += r.running;
  }
  if (first != last) {  // the seeds reach every path
    CHECK(accepted > 3000);  // 7212 with seeds 1 to 300
    CHECK(refused > 3000);
    CHECK(granted > 2000);
    CHECK(running > 3000);
  }
}
