// The scheduler's pure parts: arrivals with sessions, and the batch planner's rules.

#include <catch2/catch.hpp>

#include "model/scheduler/batch_planner.hpp"
#include "model/front_end/workload.hpp"

using namespace kvtier;

namespace {

trace_request turn(uint64_t seq, int64_t at, uint64_t session, uint32_t n, int64_t think,
                   bool follows) {
  trace_request r;
  r.seq = seq;
  r.arrival_ns = at;
  r.session = session;
  r.turn = n;
  r.think_ns = think;
  r.follows_previous = follows;
  r.input_tokens = 16;
  return r;
}

workload::feed from(std::vector<trace_request> v) {
  auto list = std::make_shared<std::vector<trace_request>>(std::move(v));
  auto next = std::make_shared<size_t>(0);
  return [=](trace_request& r) {
    if (*next >= list->size())
      return false;
    r = (*list)[(*next)++];
    return true;
  };
}

std::vector<uint64_t> seqs(const std::vector<trace_request>& v) {
  std::vector<uint64_t> out;
  for (const auto& r : v)
    out.push_back(r.seq);
  return out;
}

}  // namespace

TEST_CASE("workload: independent requests arrive at their recorded times", "[scheduler][workload]") {
  workload w(from({turn(0, 5, 0, 0, 0, false), turn(1, 5, 0, 0, 0, false),
                   turn(2, 9, 0, 0, 0, false)}));
  CHECK(w.next_arrival() == 5);
  std::vector<trace_request> due;
  w.take_due(5, due);
  CHECK(seqs(due) == std::vector<uint64_t>{0, 1});  // ties keep trace order
  CHECK(w.next_arrival() == 9);
  w.take_due(20, due);
  CHECK(due.back().arrival_ns == 9);
  CHECK(w.exhausted());
}

TEST_CASE("workload: a session turn arrives think time after the turn before it finished",
          "[scheduler][workload]") {
  // Turn 1 was recorded at 100 but follows turn 0 with 30 ns of thinking.
  workload w(from({turn(0, 0, 7, 0, 0, false), turn(1, 100, 7, 1, 30, true),
                   turn(2, 50, 0, 0, 0, false)}));
  std::vector<trace_request> due;
  w.take_due(0, due);
  CHECK(seqs(due) == std::vector<uint64_t>{0});
  CHECK(w.next_arrival() == 50);  // turn 1 waits for turn 0 to finish, not for time 100
  w.take_due(60, due);
  CHECK(due.back().seq == 2);
  CHECK(w.next_arrival() == workload::never);
  w.finished(due[0], 200);  // turn 0 finished at 200: turn 1 at 230
  CHECK(w.next_arrival() == 230);
  w.take_due(230, due);
  CHECK(due.back().seq == 1);
  CHECK(due.back().arrival_ns == 230);
  CHECK(w.exhausted());
}

TEST_CASE("workload: a time scale stretches recorded arrivals and think times",
          "[scheduler][workload]") {
  workload w(from({turn(0, 10, 7, 0, 0, false), turn(1, 100, 7, 1, 30, true),
                   turn(2, 50, 0, 0, 0, false)}),
             2.5);
  std::vector<trace_request> due;
  CHECK(w.next_arrival() == 25);
  w.take_due(25, due);
  CHECK(due.back().arrival_ns == 25);
  CHECK(w.next_arrival() == 125);
  w.take_due(125, due);
  CHECK(due.back().seq == 2);
  w.finished(due[0], 200);  // the follower thinks 2.5 x 30 ns
  CHECK(w.next_arrival() == 275);
  w.take_due(275, due);
  CHECK(due.back().arrival_ns == 275);
  CHECK(w.exhausted());
}

TEST_CASE("workload: a follower read after its predecessor finished is found by reading ahead",
          "[scheduler][workload]") {
  // A sub-agent's first turn follows main turn 0; the trace lists an independent request first.
  trace_request sub = turn(2, 300, 9, 0, 10, true);
  sub.parent_session = 7;
  sub.parent_turn = 0;
  workload w(from({turn(0, 0, 7, 0, 0, false), turn(1, 250, 0, 0, 0, false), sub}));
  std::vector<trace_request> due;
  w.take_due(0, due);
  w.finished(due[0], 40);  // reads ahead past request 1 to find the sub-agent
  CHECK(w.next_arrival() == 50);
  w.take_due(50, due);
  CHECK(due.back().seq == 2);
  w.take_due(250, due);
  CHECK(due.back().seq == 1);
  CHECK(w.exhausted());
}

namespace {

// A book of requests with `blocks` listed 16-token blocks each.
request_book book_of(std::vector<uint32_t> blocks, uint32_t output = 4) {
  request_book b;
  for (size_t i = 0; i < blocks.size(); ++i) {
    trace_request r;
    r.seq = i;
    r.input_tokens = blocks[i] * 16;
    r.output_tokens = output;
    std::vector<cache_block> cb(blocks[i], cache_block{0, 16});
    for (uint32_t k = 0; k < blocks[i]; ++k)
      cb[k].hash = i * 1000 + k;
    b.add(r, cb, 16);
    b.waiting.push_back(i);
  }
  return b;
}

probe_reply misses(const request_book& b, uint32_t available) {
  probe_reply r;
  r.available_blocks = available;
  for (request_id id : b.waiting)
    r.matches.push_back({id, 0, 0, 0, 0});
  return r;
}

}  // namespace

TEST_CASE("planner: admission is first come first served and stops at the first misfit",
          "[scheduler][planner]") {
  scheduler_options o;
  o.block_size = 16;
  o.token_budget = 1000;
  o.reserve_output_blocks = 0;
  request_book b = book_of({4, 10, 2});
  output_reserve reserve(o);
  step_plan plan = plan_running(b, o);
  probe_reply reply = misses(b, 8);
  plan_rest(b, o, reserve, 8, &reply, plan);
  // 4 blocks fit; the next needs 10 of the 4 left: it stops admission, the small one behind
  // it does not pass it.
  REQUIRE(plan.admits.size() == 1);
  CHECK(plan.admits[0].req == 0);
  CHECK(plan.admits[0].tokens == 64);
}

TEST_CASE("planner: idle device hits an admission starts to hold count against available blocks",
          "[scheduler][planner]") {
  scheduler_options o;
  o.block_size = 16;
  o.reserve_output_blocks = 0;
  request_book b = book_of({10});
  output_reserve reserve(o);
  // 8 of its 10 blocks are cached on the device and nobody holds them: they are part of the
  // 9 available blocks, so admitting it leaves 1 for its 2 fresh blocks.
  probe_reply reply;
  reply.available_blocks = 9;
  reply.matches.push_back({0, 8, 0, 128, 0, 8});
  step_plan plan = plan_running(b, o);
  plan_rest(b, o, reserve, 9, &reply, plan);
  CHECK(plan.admits.empty());
  reply.available_blocks = 10;
  step_plan roomy = plan_running(b, o);
  plan_rest(b, o, reserve, 10, &reply, roomy);
  REQUIRE(roomy.admits.size() == 1);
  CHECK(roomy.items[0].need_blocks == 2);
  // Held by a running request, the same hits cost nothing more.
  reply.matches[0].idle_device_blocks = 0;
  step_plan shared = plan_running(b, o);
  plan_rest(b, o, reserve, 2, &reply, shared);
  CHECK(shared.admits.size() == 1);
}

TEST_CASE("planner: the reserve of output blocks holds back new prefills", "[scheduler][planner]") {
  scheduler_options o;
  o.block_size = 16;
  o.reserve_output_blocks = 16;
  request_book b = book_of({2, 2});
  output_reserve reserve(o);
  CHECK(reserve.blocks() == 16);
  step_plan plan = plan_running(b, o);
  probe_reply reply = misses(b, 19);
  plan_rest(b, o, reserve, 19, &reply, plan);
  // The first needs 2 blocks and nobody runs; the second needs 2 + 1 x 16 reserved > 17 left.
  CHECK(plan.admits.size() == 1);
  step_plan roomy = plan_running(b, o);
  probe_reply more = misses(b, 20);
  plan_rest(b, o, reserve, 20, &more, roomy);
  CHECK(roomy.admits.size() == 2);  // with 18 left it fits exactly
  for (int i = 0; i < 640; ++i)  // 16 / 0.025 steps: the reserve has decayed to nothing
    reserve.after_step();
  CHECK(reserve.blocks() == 0);
  reserve.after_preemption();
  CHECK(reserve.blocks() == 16);
}

TEST_CASE("planner: a full prefix hit still computes its last block", "[scheduler][planner]") {
  scheduler_options o;
  o.block_size = 16;
  o.reserve_output_blocks = 0;
  request_book b = book_of({3});
  output_reserve reserve(o);
  step_plan plan = plan_running(b, o);
  probe_reply reply;
  reply.available_blocks = 10;
  reply.matches.push_back({0, 3, 0, 48, 0});  // every block on the device
  plan_rest(b, o, reserve, 10, &reply, plan);
  REQUIRE(plan.items.size() == 1);
  CHECK(plan.items[0].start == 32);
  CHECK(plan.items[0].tokens == 16);
}

TEST_CASE("planner: chunked prefill within the token budget, decode one token",
          "[scheduler][planner]") {
  scheduler_options o;
  o.block_size = 16;
  o.token_budget = 40;
  o.reserve_output_blocks = 0;
  request_book b = book_of({5, 1});
  output_reserve reserve(o);
  step_plan plan = plan_running(b, o);
  probe_reply reply = misses(b, 100);
  plan_rest(b, o, reserve, 100, &reply, plan);
  // 80 prompt tokens, 40 of budget: a first chunk of 40 takes it all.
  REQUIRE(plan.items.size() == 1);
  CHECK(plan.items[0].tokens == 40);
  CHECK(plan.admits[0].tokens == 40);
}

TEST_CASE("planner: short of blocks, the last admitted is preempted", "[scheduler][planner]") {
  scheduler_options o;
  o.block_size = 16;
  request_book b = book_of({1, 1, 1});
  for (request_id id : {0, 1, 2}) {  // three requests decoding, each at a block boundary
    live_request& r = b.at(id);
    r.running = true;
    r.generated = 1;
    r.computed = 16;
    r.covered_blocks = 1;
    b.running.push_back(id);
  }
  b.waiting.clear();
  output_reserve reserve(o);
  step_plan plan = plan_running(b, o);
  CHECK(plan.need_blocks == 3);
  probe p;
  REQUIRE(needs_probe(b, o, plan, 1, reserve.blocks(), p));
  CHECK(p.victims == std::vector<request_id>{2, 1, 0});
  probe_reply reply;
  reply.available_blocks = 1;
  reply.victim_frees = {1, 1};
  plan_rest(b, o, reserve, 1, &reply, plan);
  // Preempting request 2 frees its block and drops its need: 2 needed, 2 available.
  CHECK(plan.preempted == std::vector<request_id>{2});
  CHECK(plan.grows.size() == 2);
  CHECK(plan.admits.empty());
}
