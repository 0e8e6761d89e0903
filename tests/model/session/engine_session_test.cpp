// The engine session (model/session/), without CAF: the transition table, a request's life, the
// step checks' refusals in the error reply's words (nothing applied), the controller's answers
// that do not fit (refused, nothing applied), the engine-owned device tables, and each invariant
// firing on a corrupted session. Random sessions against a reference:
// engine_session_reference_test.cpp.

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/session/engine_session.hpp"
#include "tests/model/session/session_helpers.hpp"

using namespace kvtier;
using namespace kvtier::session;
using kvtier::session::test::checked;
using kvtier::session::test::prompt;

namespace {

constexpr req_state all_states[] = {req_state::loading, req_state::waiting,
                                    req_state::admitting, req_state::running};
constexpr req_event all_events[] = {req_event::loaded,   req_event::admitted,
                                    req_event::granted,  req_event::refused,
                                    req_event::computed, req_event::grown,
                                    req_event::preempted, req_event::finished};

engine_step step_of(uint64_t number, commit c) {
  engine_step s;
  s.number = number;
  s.work = std::move(c);
  return s;
}

// Allocated and loaded: waiting. Controller ids are 100 + the engine's.
void add_waiting(engine_session& s, uint64_t req, uint32_t blocks = 2) {
  REQUIRE_FALSE(s.allocate(req, 100 + req, prompt(blocks, req)));
  std::vector<parked_call> woken;
  REQUIRE_FALSE(s.loaded({100 + req, 0, 50}, woken));
}

// Admitted and granted: running. `step` is the engine's step number to use.
void admit(engine_session& s, uint64_t step, uint64_t req, uint32_t tokens = 128,
           std::vector<uint32_t> ids = {}) {
  commit c;
  c.admits = {{req, tokens}};
  if (!ids.empty())
    c.admit_blocks = {ids};
  engine_step es = step_of(step, c);
  begun_step b;
  REQUIRE_FALSE(s.begin_step(es, b));
  grant g;
  g.admits = {{100 + req, true}};
  settled_step out;
  REQUIRE_FALSE(s.end_step(es, g, out));
}

req_state state_of(const engine_session& s, uint64_t req) {
  const session_request* r = s.find(req);
  REQUIRE(r);
  return r->state;
}

// The session's requests and states, to show a refusal changed nothing.
std::map<uint64_t, std::pair<request_id, req_state>> snapshot(engine_session& s) {
  std::map<uint64_t, std::pair<request_id, req_state>> out;
  for (const auto& [req, r] : s.state_for_test().requests)
    out[req] = {r.global, r.state};
  return out;
}

}  // namespace

TEST_CASE("session: the transition table is the diagram's", "[session]") {
  std::map<std::pair<req_state, req_event>, std::optional<req_state>> legal = {
    {{req_state::loading, req_event::loaded}, req_state::waiting},
    {{req_state::waiting, req_event::admitted}, req_state::admitting},
    {{req_state::waiting, req_event::finished}, std::nullopt},
    {{req_state::admitting, req_event::granted}, req_state::running},
    {{req_state::admitting, req_event::refused}, req_state::waiting},
    {{req_state::running, req_event::computed}, req_state::running},
    {{req_state::running, req_event::grown}, req_state::running},
    {{req_state::running, req_event::preempted}, req_state::waiting},
    {{req_state::running, req_event::finished}, std::nullopt},
  };
  for (req_state s : all_states)
    for (req_event e : all_events) {
      INFO(state_name(s) << " + " << event_name(e));
      transition t = next_state(s, e);
      auto it = legal.find({s, e});
      REQUIRE(t.legal == (it != legal.end()));
      if (t.legal)
        CHECK(t.to == it->second);
    }
  for (req_event e : all_events)
    CHECK_FALSE(next_state(std::nullopt, e).legal);
}

TEST_CASE("session: a request's life, under the controller's ids", "[session]") {
  engine_session s;
  REQUIRE_FALSE(s.allocate(7, 107, prompt(3)));
  CHECK(state_of(s, 7) == req_state::loading);
  CHECK(s.allocate(7, 108, prompt(3)) == std::string("request 7 is already allocated"));
  // wait parks while it loads; ready wakes the parked calls
  CHECK(s.park_until_loaded(7, {1, 41, {}}));
  CHECK(s.has_waiters());
  std::vector<parked_call> woken;
  REQUIRE_FALSE(s.loaded({107, 2, 30}, woken));
  REQUIRE(woken.size() == 1);
  CHECK(woken[0].id == 41);
  CHECK_FALSE(s.has_waiters());
  CHECK(state_of(s, 7) == req_state::waiting);
  CHECK(s.find(7)->prefetched == 2);
  CHECK_FALSE(s.park_until_loaded(7, {1, 42, {}}));  // loaded: answered at once
  // admitted, granted, running
  commit c;
  c.admits = {{7, 192}};
  engine_step es = step_of(1, c);
  begun_step b;
  REQUIRE_FALSE(s.begin_step(es, b));
  CHECK(b.number == 1);
  REQUIRE(b.work.admits.size() == 1);
  CHECK(b.work.admits[0].req == 107);
  CHECK(state_of(s, 7) == req_state::admitting);
  grant g;
  g.admits = {{107, true, 1, 1, 0}};
  settled_step out;
  REQUIRE_FALSE(s.end_step(es, g, out));
  CHECK(out.admits == std::vector<uint64_t>{7});
  CHECK(out.prompt_blocks == std::vector<uint32_t>{3});
  CHECK(state_of(s, 7) == req_state::running);
  // a shorthand is numbered after the last step; computed and grows keep it running
  engine_step more;
  more.work.computed = {{7, 192}};
  more.work.grows = {{7, 256}};
  REQUIRE_FALSE(s.begin_step(more, b));
  CHECK(b.number == 2);
  CHECK(b.work.computed[0].req == 107);
  CHECK(b.work.grows[0].req == 107);
  g = {};
  g.failed_grows = {107};
  REQUIRE_FALSE(s.end_step(more, g, out));
  CHECK(out.failed_grows == std::vector<uint64_t>{7});
  // preempted: waiting; admitted again but refused: waiting; finished: gone
  commit p;
  p.preempted = {{7, 192}};
  REQUIRE_FALSE(s.begin_step(step_of(5, p), b));
  CHECK(state_of(s, 7) == req_state::waiting);
  commit again;
  again.admits = {{7, 64}};
  es = step_of(6, again);
  REQUIRE_FALSE(s.begin_step(es, b));
  g = {};
  g.admits = {{107, false}};
  REQUIRE_FALSE(s.end_step(es, g, out));
  CHECK(state_of(s, 7) == req_state::waiting);
  commit done;
  done.finished = {7};
  REQUIRE_FALSE(s.begin_step(step_of(7, done), b));
  CHECK(b.work.finished == std::vector<request_id>{107});
  CHECK(s.find(7) == nullptr);
  CHECK_FALSE(s.engine_id(107));
  CHECK(checked(s).ok());
}

TEST_CASE("session: a step that does not fit is refused whole, in the reply's words",
          "[session]") {
  engine_session s;
  add_waiting(s, 1);
  add_waiting(s, 2);
  admit(s, 1, 2);
  REQUIRE_FALSE(s.allocate(3, 103, prompt(1)));  // loading
  commit a;
  a.admits = {{1, 64}};
  engine_step pending = step_of(2, a);
  begun_step b;
  REQUIRE_FALSE(s.begin_step(pending, b));  // 1 admitting, its grant not back
  auto before = snapshot(s);
  uint64_t last = s.last_step();
  auto refused = [&](commit c, uint64_t number = 10) {
    begun_step out;
    auto why = s.begin_step(step_of(number, std::move(c)), out);
    CHECK(snapshot(s) == before);
    CHECK(s.last_step() == last);
    return why.value_or("accepted");
  };
  commit c;
  c.computed = {{1, 64}};
  CHECK(refused(c) == "request 1 in 'computed' is not running");
  c = {};
  c.finished = {9};
  CHECK(refused(c) == "request 9 in 'finished' is not allocated");
  c.finished = {3};
  CHECK(refused(c) == "request 3 in 'finished' is still loading from storage ('wait' first)");
  c.finished = {1};
  CHECK(refused(c) == "request 1 in 'finished' has an admission not yet answered");
  c.finished = {2, 2};
  CHECK(refused(c) == "request 2 in 'finished' is not allocated");
  c = {};
  c.preempted = {{3, 0}};
  CHECK(refused(c) == "request 3 in 'preempted' is not running");
  c = {};
  c.finished = {2};
  c.grows = {{2, 64}};  // finished earlier in the same step
  CHECK(refused(c) == "request 2 in 'grows' is not running");
  c = {};
  c.admits = {{2, 64}};
  CHECK(refused(c) == "request 2 in 'admits' is not waiting (allocated, loaded and not running)");
  c = {};
  c.computed = {{2, 64}};
  c.admits = {{1, 64}};
  CHECK(refused(c) == "request 1 in 'admits' is not waiting (allocated, loaded and not running)");
  c = {};
  c.computed = {{2, 64}};
  CHECK(refused(c, 2) == "step 2 does not follow step 2 (an engine's step numbers increase)");
  // preempted then admitted again in the same step: the controller's order allows it
  c = {};
  c.preempted = {{2, 64}};
  c.admits = {{2, 0}};
  CHECK(refused(c) == "request 2 is admitted for 0 tokens");
  c.admits = {{2, 64}};
  REQUIRE_FALSE(s.begin_step(step_of(11, c), b));
  CHECK(state_of(s, 2) == req_state::admitting);
  CHECK(checked(s).ok());
}

TEST_CASE("session: controller answers that do not fit the state are refused, not applied",
          "[session]") {
  engine_session s;
  add_waiting(s, 1);
  std::vector<parked_call> woken;
  CHECK(s.loaded({101, 0, 0}, woken) == std::string("request 1: 'loaded' while it is waiting"));
  CHECK(s.loaded({555, 0, 0}, woken)
        == std::string("the controller's ready names request 555, which is none of the engine's"));
  // A grant for a request that is not admitting, or none of the engine's.
  engine_step none;
  grant g;
  g.admits = {{101, true}};
  settled_step out;
  CHECK(s.end_step(none, g, out) == std::string("request 1: 'granted' while it is waiting"));
  CHECK(state_of(s, 1) == req_state::waiting);
  add_waiting(s, 2);
  commit c;
  c.admits = {{2, 64}};
  engine_step es = step_of(1, c);
  begun_step b;
  REQUIRE_FALSE(s.begin_step(es, b));
  g.admits = {{102, true}, {999, true}};
  CHECK(s.end_step(es, g, out)
        == std::string("the grant admits the controller's request 999, which is none of the "
                       "engine's"));
  CHECK(state_of(s, 2) == req_state::admitting);  // nothing of the grant applied
  g.admits = {{102, true}, {102, false}};
  CHECK(s.end_step(es, g, out) == std::string("request 2: 'refused' while it is running"));
  CHECK(state_of(s, 2) == req_state::admitting);
  g.admits = {{102, true}};
  REQUIRE_FALSE(s.end_step(es, g, out));
  CHECK(state_of(s, 2) == req_state::running);
  CHECK(checked(s).ok());
}

TEST_CASE("session: an engine that leaves releases every request", "[session]") {
  engine_session s;
  add_waiting(s, 1);
  add_waiting(s, 2);
  admit(s, 1, 2);
  REQUIRE_FALSE(s.allocate(3, 103, prompt(1)));
  released_requests r = s.release_all();
  std::sort(r.finished.begin(), r.finished.end());
  CHECK(r.finished == std::vector<request_id>{101, 102});
  CHECK(r.loading == std::vector<request_id>{103});
  CHECK(s.size() == 0);
  CHECK(checked(s).ok());
}

TEST_CASE("session: the engine-owned device tier's tables", "[session][engine_tier]") {
  engine_session s({device_owner::engine, 64, 16});
  add_waiting(s, 1, 3);
  add_waiting(s, 2, 2);
  begun_step b;
  commit c;
  c.admits = {{1, 192}};
  c.admit_blocks = {{4, 5}};
  auto before = snapshot(s);
  CHECK(s.begin_step(step_of(1, c), b)
        == std::string("request 1 in 'admits' gives 2 device block ids for 192 tokens: version 3 "
                       "needs 3, the engine's block table"));
  c.admit_blocks = {{4, 5, 16}};
  CHECK(s.begin_step(step_of(1, c), b)
        == std::string("request 1 in 'admits' names device block 16, beyond the engine's 16 "
                       "blocks"));
  CHECK(snapshot(s) == before);
  c.admit_blocks = {{4, 5, 6}};
  engine_step es = step_of(1, c);
  REQUIRE_FALSE(s.begin_step(es, b));
  CHECK(b.work.admit_blocks == std::vector<std::vector<uint32_t>>{{4, 5, 6}});
  grant g;
  g.admits = {{101, true, 1, 1, 1}};  // a device hit, a host hit, a storage hit
  settled_step out;
  REQUIRE_FALSE(s.end_step(es, g, out));
  CHECK(out.load_blocks == std::vector<std::vector<uint32_t>>{{5, 6}});
  CHECK(s.find(1)->device_table == std::vector<uint32_t>{4, 5, 6});
  // computed: the engine's blocks hold the prompt's names
  commit comp;
  comp.computed = {{1, 192}};
  REQUIRE_FALSE(s.begin_step(step_of(2, comp), b));
  CHECK(s.state_for_test().device_contents.size() == 3);
  // a running request's block may not be evicted
  engine_step ev = step_of(3, {});
  ev.evicted = {5};
  CHECK(s.begin_step(ev, b)
        == std::string("'evicted' names device block 5, which request 1 still holds (a running "
                       "request's blocks stay)"));
  ev.evicted = {16};
  CHECK(s.begin_step(ev, b)
        == std::string("'evicted' names device block 16, beyond the engine's 16 blocks"));
  // finished, then evicted: the names nobody holds go to the controller
  ev.work.finished = {1};
  ev.evicted = {4, 5};
  REQUIRE_FALSE(s.begin_step(ev, b));
  CHECK(b.work.device_dropped == std::vector<block_hash>{1000, 1001});
  CHECK(s.state_for_test().device_contents.size() == 1);
  // grows must bring the blocks the new tokens need
  admit(s, 4, 2, 64, {9});
  commit grow;
  grow.grows = {{2, 200}};
  grow.grow_blocks = {{10}};
  CHECK(s.begin_step(step_of(5, grow), b)
        == std::string("request 2 in 'grows' gives 1 new device block ids: it holds 1 and 200 "
                       "tokens need 3 more"));
  grow.grow_blocks = {{10, 11, 12}};
  es = step_of(5, grow);
  REQUIRE_FALSE(s.begin_step(es, b));
  REQUIRE_FALSE(s.end_step(es, {}, out));
  CHECK(s.find(2)->device_table == std::vector<uint32_t>{9, 10, 11, 12});
  CHECK(checked(s).ok());
  // The engine leaves (bye, timeout): its device goes with it, the names it held dropped.
  released_requests r = s.release_all();
  CHECK(r.device_dropped == std::vector<block_hash>{1002});
  CHECK(s.state_for_test().device_contents.empty());
  CHECK(checked(s).ok());
}

TEST_CASE("session: device block ids need the engine-owned tier", "[session][engine_tier]") {
  engine_session s({device_owner::kvtier, 64, 16});
  add_waiting(s, 1);
  begun_step b;
  commit c;
  c.admits = {{1, 64}};
  c.admit_blocks = {{3}};
  CHECK(s.begin_step(step_of(1, c), b)
        == std::string("device block ids in 'admits' or 'grows' need protocol version 3 (the "
                       "engine-owned device tier)"));
  engine_step ev = step_of(1, {});
  ev.evicted = {1};
  CHECK(s.begin_step(ev, b)
        == std::string("'evicted' needs protocol version 3 (the engine-owned device tier)"));
  c.admit_blocks = {{}};  // empty lists (entries of two elements) are no ids
  REQUIRE_FALSE(s.begin_step(step_of(1, c), b));
  CHECK(b.work.admit_blocks.empty());  // the controller gets none
}

TEST_CASE("session: each invariant fires on a corrupted session", "[session][invariants]") {
  auto fresh = [] {
    engine_session s({device_owner::engine, 64, 16});
    add_waiting(s, 1, 1);
    admit(s, 1, 1, 64, {3});
    REQUIRE_FALSE(s.allocate(2, 102, prompt(1)));
    begun_step b;
    commit comp;
    comp.computed = {{1, 64}};
    REQUIRE_FALSE(s.begin_step(step_of(2, comp), b));
    REQUIRE(checked(s).ok());
    REQUIRE(checked(s).checked > 0);
    return s;
  };
  auto fires = [](engine_session& s, const char* which) {
    invariant_report r = checked(s);
    CHECK(r.violations > 0);
    REQUIRE_FALSE(r.messages.empty());
    CHECK_THAT(r.messages.front(), Catch::StartsWith(which));
  };
  {
    engine_session s = fresh();
    s.state_for_test().requests.at(1).global = 555;  // S1: the id does not map back
    fires(s, "S1");
  }
  {
    engine_session s = fresh();
    s.state_for_test().engine_ids[777] = 9;  // S1: a controller id of no request
    fires(s, "S1");
  }
  {
    engine_session s = fresh();
    s.state_for_test().requests.at(1).waiters.push_back({});  // S2: parked on a running one
    fires(s, "S2");
  }
  {
    engine_session s = fresh();
    s.state_for_test().requests.at(1).device_table.push_back(99);  // S3: beyond the tier
    fires(s, "S3");
  }
  {
    engine_session s({device_owner::kvtier, 64, 16});
    add_waiting(s, 1);
    s.state_for_test().device_contents[2] = 5;  // S3: contents though kvtier owns the device
    s.state_for_test().device_copies[5] = 1;
    fires(s, "S3");
  }
  {
    engine_session s = fresh();
    ++s.state_for_test().device_copies.begin()->second;  // S4
    fires(s, "S4");
  }
}

// -- random sessions against a reference ------------------------------------------------------------
