// The front end's PD handoffs driven directly, without CAF (model/front_end/pd_handoffs.hpp):
// each answer's step is what the actor does next.

#include <catch2/catch.hpp>

#include "model/front_end/pd_handoffs.hpp"
#include "tests/stops_the_run.hpp"

using namespace kvtier;
using kvtier::test::stops_the_run;

namespace {

// Instances 0 and 1 prefill (the router's 0 and 1), 2 and 3 decode (decoders 0 and 1).
pd_handoffs two_by_two(const pd_options& o = {}) {
  return pd_handoffs(o, {0, 1}, {2, 3});
}

front_end_report fresh_report() {
  front_end_report r;
  r.per_instance.assign(4, 0);
  return r;
}

request_arrival arriving(uint64_t seq, uint32_t prompt = 64, uint64_t session = 0,
                        uint32_t turn = 0) {
  request_arrival a;
  a.req.seq = seq;
  a.req.input_tokens = prompt;
  a.req.output_tokens = 8;
  a.req.session = session;
  a.req.turn = turn;
  a.req.ids = {1, 2, 3, 4};
  a.blocks.resize(4);
  return a;
}

preallocate_reply verdict(request_id id, preallocation_verdict v, uint32_t held = 0) {
  return {id, v, held};
}

}  // namespace

TEST_CASE("pd handoffs: a granted request is prefilled, handed off and decoded",
          "[front_end][pd]") {
  pd_handoffs h = two_by_two();
  front_end_report rep = fresh_report();
  size_t d = h.begin(1, arriving(7, 64, 5, 2));
  CHECK(d == 0);
  CHECK(h.stage_of(7) == handoff_stage::allocating);
  CHECK(h.in_flight(0) == 1);
  CHECK(h.preallocation(7).arrival.req.ids.size() == 4);  // D sees the request whole

  allocation_step a = h.on_preallocated(7, 0, verdict(7, preallocation_verdict::granted, 3), 100, rep);
  REQUIRE(a.what == allocation_step::next::prefill);
  CHECK(a.instance == 1);
  CHECK(a.arrival.handoff.active);
  CHECK(a.arrival.handoff.decode_has_blocks == 3);  // direct: D's hits are never sent
  CHECK(a.arrival.blocks.size() == 4);
  CHECK(rep.per_instance == std::vector<uint64_t>{0, 1, 1, 0});
  CHECK(h.stage_of(7) == handoff_stage::prefilling);

  request_done p;
  p.req = 7;
  p.prefill_end_ns = 1'000;
  p.first_token_ns = 1'200;
  prefill_step s = h.on_prefilled(7, p, rep);
  CHECK(s.answer.prefill == 1);
  CHECK(s.answer.prompt_tokens == 64);
  CHECK(s.decoder == 0);
  CHECK(s.handoff.req == 7);
  CHECK(s.handoff.outcome == handoff_outcome::delivered);
  CHECK(s.handoff.first_token_ns == 1'200);
  CHECK_FALSE(s.handoff.inject_failure);
  CHECK(h.stage_of(7) == handoff_stage::decoding);

  request_done dd;
  dd.req = 7;
  dd.at_ns = 5'000;
  dd.decode_ready_ns = 1'700;
  decode_step e = h.on_decoded(7, dd, rep);
  CHECK_FALSE(e.rerouted);
  CHECK(e.end.session == 5);
  CHECK(e.end.turn == 2);
  CHECK(e.end.at_ns == 5'000);
  CHECK(rep.finished == 1);
  CHECK(rep.handoff_ns == std::vector<int64_t>{700});
  CHECK(h.size() == 0);
  CHECK(h.in_flight(0) == 0);
}

TEST_CASE("pd handoffs: the decoder asked is the one with the fewest in flight",
          "[front_end][pd]") {
  pd_handoffs h = two_by_two();
  CHECK(h.begin(0, arriving(1)) == 0);
  CHECK(h.begin(0, arriving(2)) == 1);
  CHECK(h.begin(1, arriving(3)) == 0);
  CHECK(h.in_flight(0) == 2);
  CHECK(h.decoder_instance(1) == 3);
  front_end_report rep = fresh_report();
  // A refusal gives its place back while the request waits.
  h.on_preallocated(1, 0, verdict(1, preallocation_verdict::no_blocks), 0, rep);
  CHECK(h.in_flight(0) == 1);
  CHECK(h.begin(1, arriving(4)) == 0);  // ties go to the first
}

TEST_CASE("pd handoffs: a refused request waits until FastDeploy's deadline, then fails",
          "[front_end][pd]") {
  pd_options o;
  o.wait_decode_resource_ns = 30'000;
  pd_handoffs h = two_by_two(o);
  front_end_report rep = fresh_report();
  h.begin(0, arriving(9, 48));
  allocation_step a = h.on_preallocated(9, 0, verdict(9, preallocation_verdict::no_slot), 1'000, rep);
  REQUIRE(a.what == allocation_step::next::wait);
  CHECK(a.wake_ns == 31'000);
  CHECK(rep.preallocation_refusals == 1);
  CHECK(h.stage_of(9) == handoff_stage::waiting);
  wait_step w = h.on_wait(9, 31'000, rep);
  CHECK_FALSE(w.ask_again);
  CHECK(w.answer.prefill == 0);
  CHECK(w.answer.prompt_tokens == 48);
  CHECK(w.end.at_ns == 31'000);
  CHECK(rep.decode_resource_timeouts == 1);
  CHECK(rep.failed == 1);
  REQUIRE(rep.never_prefilled.size() == 1);
  CHECK(rep.never_prefilled[0].req == 9);
  CHECK(rep.never_prefilled[0].failed);
  CHECK_FALSE(rep.never_prefilled[0].rejected);
  CHECK_FALSE(h.contains(9));
}

TEST_CASE("pd handoffs: with retries a refused request asks again every interval, the "
          "deadline kept from the first refusal", "[front_end][pd]") {
  pd_options o;
  o.retry_decode_resource = true;
  o.retry_interval_ns = 50;
  pd_handoffs h = two_by_two(o);
  front_end_report rep = fresh_report();
  h.begin(0, arriving(3));
  allocation_step a = h.on_preallocated(3, 0, verdict(3, preallocation_verdict::waiting_queue), 10, rep);
  CHECK(a.wake_ns == 60);
  wait_step w = h.on_wait(3, 60, rep);
  REQUIRE(w.ask_again);
  CHECK(w.decoder == 0);
  CHECK(h.stage_of(3) == handoff_stage::allocating);
  a = h.on_preallocated(3, 0, verdict(3, preallocation_verdict::granted), 70, rep);
  CHECK(a.what == allocation_step::next::prefill);
  CHECK(rep.preallocation_refusals == 1);
  CHECK(rep.decode_resource_timeouts == 0);
}

TEST_CASE("pd handoffs: a request that never fits on D is rejected before any prefill",
          "[front_end][pd]") {
  pd_handoffs h = two_by_two();
  front_end_report rep = fresh_report();
  h.begin(1, arriving(4, 4096, 8, 1));
  allocation_step a = h.on_preallocated(4, 0, verdict(4, preallocation_verdict::never_fits), 77, rep);
  REQUIRE(a.what == allocation_step::next::never_prefilled);
  CHECK(a.answer.prefill == 1);
  CHECK(a.answer.prompt_tokens == 4096);
  CHECK(a.end.session == 8);
  CHECK(a.end.at_ns == 77);
  CHECK(rep.rejected == 1);
  REQUIRE(rep.never_prefilled.size() == 1);
  CHECK(rep.never_prefilled[0].rejected);
  CHECK(rep.preallocation_refusals == 0);
  CHECK(h.in_flight(0) == 0);
}

TEST_CASE("pd handoffs: P's outcomes reach D: cancelled, failed, or drawn to fail",
          "[front_end][pd]") {
  pd_options o;
  o.failure_rate = 1;
  o.transfer = pd_transfer::storage;
  pd_handoffs h = two_by_two(o);
  front_end_report rep = fresh_report();
  for (request_id id : {1, 2, 3}) {
    size_t d = h.begin(0, arriving(id));
    allocation_step a =
      h.on_preallocated(id, d, verdict(id, preallocation_verdict::granted, 2), 0, rep);
    REQUIRE(a.what == allocation_step::next::prefill);
    CHECK(a.arrival.handoff.decode_has_blocks == 0);  // storage: D reads what it lacks
  }
  request_done rejected, unsent, sent;
  rejected.rejected = true;
  unsent.handoff_ok = false;
  CHECK(h.on_prefilled(1, rejected, rep).handoff.outcome == handoff_outcome::cancelled);
  CHECK(h.on_prefilled(2, unsent, rep).handoff.outcome == handoff_outcome::failed);
  prefill_step s = h.on_prefilled(3, sent, rep);
  CHECK(s.handoff.outcome == handoff_outcome::delivered);
  CHECK(s.handoff.inject_failure);
  CHECK(rep.injected_failures == 1);

  request_done failed, recomputed;
  failed.failed = true;
  recomputed.recomputed = true;
  h.on_decoded(1, rejected, rep);
  h.on_decoded(2, failed, rep);
  h.on_decoded(3, recomputed, rep);
  CHECK(rep.rejected == 1);
  CHECK(rep.failed == 1);
  CHECK(rep.finished == 1);
  CHECK(rep.recomputed == 1);
  CHECK(rep.handoff_failures == 2);
  CHECK(rep.handoff_ns.empty());
}

TEST_CASE("pd handoffs: a request D dropped goes round again, and then asks until D has room",
          "[front_end][pd]") {
  pd_handoffs h = two_by_two();  // no retries configured
  front_end_report rep = fresh_report();
  h.begin(0, arriving(6, 64, 2, 0));
  h.on_preallocated(6, 0, verdict(6, preallocation_verdict::granted), 0, rep);
  request_done p;
  p.prefill_end_ns = 100;
  h.on_prefilled(6, p, rep);
  request_done drop;
  drop.dropped = true;
  drop.drop_saved = true;
  drop.decode_ready_ns = 150;
  drop.resume_prompt = 80;
  drop.resume_output = 3;
  drop.resume_blocks.resize(5);
  decode_step e = h.on_decoded(6, drop, rep);
  REQUIRE(e.rerouted);
  CHECK(e.arrival.req.seq == 6);
  CHECK(e.arrival.req.input_tokens == 80);
  CHECK(e.arrival.req.output_tokens == 3);
  CHECK(e.arrival.req.ids.empty());  // its blocks are the resumed ones
  CHECK(e.arrival.blocks.size() == 5);
  CHECK(e.arrival.handoff.reroutes == 1);
  CHECK(rep.rerouted == 1);
  CHECK(rep.rerouted_saved == 1);
  CHECK(rep.handoff_ns == std::vector<int64_t>{50});
  CHECK(rep.finished == 0);  // one request: it finishes once, later

  // Routed again as the same request: a refusal retries though pd.retry_decode_resource is off.
  h.begin(1, std::move(e.arrival));
  allocation_step a = h.on_preallocated(6, 0, verdict(6, preallocation_verdict::no_blocks), 1'000, rep);
  CHECK(a.wake_ns == 1'000 + pd_options{}.retry_interval_ns);
  CHECK(h.on_wait(6, a.wake_ns, rep).ask_again);
}

TEST_CASE("pd handoffs: the stage table", "[front_end][pd]") {
  using s = handoff_stage;
  CHECK(handoff_transition_allowed(s::allocating, s::waiting));
  CHECK(handoff_transition_allowed(s::allocating, s::prefilling));
  CHECK(handoff_transition_allowed(s::waiting, s::allocating));
  CHECK(handoff_transition_allowed(s::prefilling, s::decoding));
  CHECK_FALSE(handoff_transition_allowed(s::waiting, s::prefilling));    // granted unasked
  CHECK_FALSE(handoff_transition_allowed(s::allocating, s::decoding));   // handed off unprefilled
  CHECK_FALSE(handoff_transition_allowed(s::prefilling, s::allocating));
  CHECK_FALSE(handoff_transition_allowed(s::decoding, s::prefilling));   // prefilled twice
  CHECK_FALSE(handoff_transition_allowed(s::decoding, s::allocating));
}

TEST_CASE("pd handoffs: an answer out of turn stops the run", "[front_end][pd]") {
  // P answers before D granted the preallocation.
  CHECK(stops_the_run([] {
    pd_handoffs h = two_by_two();
    front_end_report rep = fresh_report();
    h.begin(0, arriving(1));
    h.on_prefilled(1, request_done{}, rep);
  }));
  // D answers a request twice.
  CHECK(stops_the_run([] {
    pd_handoffs h = two_by_two();
    front_end_report rep = fresh_report();
    h.begin(0, arriving(1));
    h.on_preallocated(1, 0, verdict(1, preallocation_verdict::granted), 0, rep);
    h.on_preallocated(1, 0, verdict(1, preallocation_verdict::granted), 0, rep);
  }));
  // The timer of a request that is not waiting, and an answer from a decoder not asked.
  CHECK(stops_the_run([] {
    pd_handoffs h = two_by_two();
    front_end_report rep = fresh_report();
    h.begin(0, arriving(1));
    h.on_wait(1, 0, rep);
  }));
  CHECK(stops_the_run([] {
    pd_handoffs h = two_by_two();
    front_end_report rep = fresh_report();
    h.begin(0, arriving(1));
    h.on_preallocated(1, 1, verdict(1, preallocation_verdict::granted), 0, rep);
  }));
  // The same request begun twice.
  CHECK(stops_the_run([] {
    pd_handoffs h = two_by_two();
    h.begin(0, arriving(1));
    h.begin(1, arriving(1));
  }));
}
