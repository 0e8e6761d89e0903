// The scheduler core driven directly, without CAF: each call's orders are what the actor would
// send, in order (model/scheduler/scheduler_core.hpp).

#include <variant>

#include <catch2/catch.hpp>

#include "model/pd/preallocation.hpp"
#include "model/scheduler/scheduler_core.hpp"
#include "tests/stops_the_run.hpp"

using namespace kvtier;

namespace {

std::vector<cache_block> blocks_of(std::vector<uint64_t> ids) {
  std::vector<cache_block> out;
  map_trace_blocks(7, ids.data(), ids.size(), static_cast<uint32_t>(ids.size()) * 16, 16, 16, out);
  return out;
}

request_arrival arrival_of(uint64_t seq, std::vector<uint64_t> ids, uint32_t output) {
  request_arrival a;
  a.req.seq = seq;
  a.req.input_tokens = static_cast<uint32_t>(ids.size()) * 16;
  a.req.output_tokens = output;
  a.blocks = blocks_of(std::move(ids));
  return a;
}

scheduler_core_options opts() {
  scheduler_core_options o;
  o.options.block_size = 16;
  o.options.reserve_output_blocks = 0;  // admissions keep no blocks back for decodes
  o.compute.step_overhead_ns = 1000;
  o.compute.layers = 2;
  o.device_blocks = 64;
  return o;
}

template <class T>
T& only(scheduler_orders& out) {
  REQUIRE(out.size() == 1);
  REQUIRE(std::holds_alternative<T>(out[0]));
  return std::get<T>(out[0]);
}

template <class T>
T& at(scheduler_orders& out, size_t i) {
  REQUIRE(out.size() > i);
  REQUIRE(std::holds_alternative<T>(out[i]));
  return std::get<T>(out[i]);
}

admit_result admitted(request_id id) {
  admit_result a;
  a.req = id;
  a.admitted = true;
  return a;
}

// Request 1 (two blocks, three output tokens) arrives, is ready with 64 blocks free and is
// committed alone: the commit of its first step.
commit commit_one(scheduler_core& core, scheduler_orders& out) {
  request_arrival a = arrival_of(1, {1, 2}, 3);
  REQUIRE_FALSE(core.on_arrival(a, out = {}).has_value());
  core.on_ready(ready{1, 0, 64}, out = {});
  core.on_step_timer(0, out = {});
  core.on_probe_reply(probe_reply{1, 64, {{1, 0, 0, 0, 0, 0}}, {}}, out = {});
  return only<commit>(out);
}

// The grant of commit_one's step: request 1 admitted, 62 blocks left.
grant grant_one(const commit& c) {
  grant g;
  g.step = c.step;
  g.admits.push_back(admitted(1));
  g.available_blocks = 62;
  return g;
}

// Drives the core from its clock, recording the orders of the last call.
struct driver {
  int64_t now = 0;
  scheduler_core core;
  scheduler_orders out;

  explicit driver(const scheduler_core_options& o)
    : core(o, step_compute::modelled, [this] { return now; }) {}

  // Arrives and gets ready at once, with `available` device blocks.
  void arrive(request_arrival a, uint32_t available) {
    request_id id = a.req.seq;
    REQUIRE_FALSE(core.on_arrival(a, out = {}).has_value());
    CHECK(only<arrival>(out).req == id);
    core.on_ready(ready{id, 0, available}, out = {});
  }
  // Grants `c` with `available` blocks left and runs the step to its end.
  void grant_and_run(commit c, uint32_t available) {
    grant g;
    g.step = c.step;
    for (const token_mark& m : c.admits)
      g.admits.push_back(admitted(m.req));
    g.available_blocks = available;
    core.on_grant(g, out = {});
    CHECK(core.phase() == step_phase::computing);
    timer_order t = only<timer_order>(out);
    CHECK(t.kind == timer_kind::step_end);
    CHECK(t.id == c.step);
    now = t.at_ns;
    core.on_step_timer(t.id, out = {});
  }
};

}  // namespace

TEST_CASE("step phases: a step's legal sequence, and what is refused",
          "[scheduler][scheduler_core]") {
  step_machine m;
  CHECK(m.phase() == step_phase::idle);
  CHECK_FALSE(m.busy());
  for (step_phase p : {step_phase::plan_set, step_phase::idle, step_phase::planning,
                       step_phase::probing, step_phase::committing_bookkeeping})
    m.move_to(p);
  CHECK(m.busy());
  m.granted_work();
  CHECK(m.phase() == step_phase::computing);
  m.move_to(step_phase::idle);
  CHECK_FALSE(m.busy());
  // A second plan tick, a commit without a plan, a step computed without a grant:
  CHECK_FALSE(step_transition_allowed(step_phase::plan_set, step_phase::plan_set));
  CHECK_FALSE(step_transition_allowed(step_phase::idle, step_phase::committing));
  CHECK_FALSE(step_transition_allowed(step_phase::probing, step_phase::computing));
  CHECK_FALSE(step_transition_allowed(step_phase::computing, step_phase::plan_set));
  CHECK_FALSE(step_transition_allowed(step_phase::committing, step_phase::probing));
}

TEST_CASE("step phases: an illegal transition stops the run", "[scheduler][scheduler_core]") {
  CHECK(kvtier::test::stops_the_run([] {
    step_machine m;
    m.move_to(step_phase::computing);  // idle -> computing: no plan, no commit, no grant
  }));
}

TEST_CASE("step phases: a refused admission is planned again once, not in a loop",
          "[scheduler][scheduler_core]") {
  step_machine m;
  auto refused_commit = [&](bool bookkeeping) {
    m.move_to(step_phase::planning);
    m.move_to(bookkeeping ? step_phase::committing_bookkeeping : step_phase::committing);
    return m.granted_nothing(false, true);
  };
  CHECK(refused_commit(false));        // planned again at once
  CHECK_FALSE(refused_commit(false));  // the replan refused too: wait for the next event
  CHECK(refused_commit(false));        // a later event's refusal is replanned again
  CHECK(refused_commit(true));         // blocks were freed: always plan again
  CHECK(refused_commit(false));
  m.move_to(step_phase::planning);
  m.move_to(step_phase::committing);
  m.granted_work();                    // work ran: the next refusal is replanned
  m.move_to(step_phase::idle);
  CHECK(refused_commit(false));
}

TEST_CASE("scheduler core: requests ready together are admitted in one step and finish",
          "[scheduler][scheduler_core]") {
  driver d(opts());
  d.arrive(arrival_of(1, {1, 2}, 2), 64);
  timer_order tick = only<timer_order>(d.out);
  CHECK(tick.kind == timer_kind::plan);
  CHECK(d.core.phase() == step_phase::plan_set);
  d.arrive(arrival_of(2, {3, 4}, 2), 64);
  CHECK(d.out.empty());  // one plan tick for the instant
  d.core.on_step_timer(0, d.out = {});
  probe& p = only<probe>(d.out);
  CHECK(p.step == 1);
  CHECK(p.candidates == std::vector<request_id>{1, 2});
  CHECK(d.core.phase() == step_phase::probing);
  probe_reply r{1, 64, {{1, 0, 0, 0, 0, 0}, {2, 0, 0, 0, 0, 0}}, {}};
  d.core.on_probe_reply(r, d.out = {});
  commit c = only<commit>(d.out);
  CHECK(c.step == 1);
  REQUIRE(c.admits.size() == 2);
  CHECK(c.admits[0].req == 1);
  CHECK(c.admits[0].tokens == 32);
  CHECK(c.admits[1].req == 2);
  CHECK(d.core.phase() == step_phase::committing);
  d.grant_and_run(c, 60);
  // Both prompts computed (their first tokens sampled): they decode, growing by a block each.
  CHECK(d.core.book().at(1).record.first_token_ns == d.now);
  c = only<commit>(d.out);
  CHECK(c.step == 2);
  CHECK(c.computed.size() == 2);
  CHECK(c.grows.size() == 2);
  CHECK(d.core.phase() == step_phase::committing_bookkeeping);
  d.grant_and_run(c, 58);
  // Both finished: answered in order, their blocks released by the next commit.
  REQUIRE(d.out.size() == 3);
  CHECK(at<answer_order>(d.out, 0).done.req == 1);
  CHECK(at<answer_order>(d.out, 1).done.req == 2);
  CHECK(at<answer_order>(d.out, 1).done.at_ns == d.now);
  c = at<commit>(d.out, 2);
  CHECK(c.finished == std::vector<request_id>{1, 2});
  d.core.on_grant(grant{3, {}, {}, 64, {}, 0, {}, {}}, d.out = {});
  CHECK(d.out.empty());  // blocks were freed, but nothing is left to plan
  CHECK(d.core.phase() == step_phase::idle);
  scheduler_report rep = d.core.report();
  CHECK(rep.drained);
  CHECK(rep.steps == 2);
  CHECK(rep.probes == 1);
  CHECK(rep.decode_tokens == 2);
}

TEST_CASE("scheduler core: blocks short, the request admitted last is preempted",
          "[scheduler][scheduler_core]") {
  driver d(opts());
  d.arrive(arrival_of(1, {1, 2}, 4), 4);
  d.arrive(arrival_of(2, {3, 4}, 4), 4);
  d.core.on_step_timer(0, d.out = {});
  d.core.on_probe_reply(probe_reply{1, 4, {{1, 0, 0, 0, 0, 0}, {2, 0, 0, 0, 0, 0}}, {}},
                        d.out = {});
  d.grant_and_run(only<commit>(d.out), 0);
  // Each needs a third block and none is free: ask what the victims, last admitted first, free.
  probe& p = only<probe>(d.out);
  CHECK(p.grow_blocks == 2);
  CHECK(p.victims == std::vector<request_id>{2, 1});
  d.core.on_probe_reply(probe_reply{2, 0, {}, {2}}, d.out = {});
  commit c = only<commit>(d.out);
  REQUIRE(c.preempted.size() == 1);
  CHECK(c.preempted[0].req == 2);
  CHECK(c.preempted[0].tokens == 32);  // what it computed, for the controller to save
  CHECK(c.grows.size() == 1);
  CHECK(c.admits.empty());              // no admission in a step that preempts
  CHECK_FALSE(c.drop_preempted);        // a mixed instance queues its victims again
  d.grant_and_run(c, 1);
  CHECK(d.core.book().waiting.front() == 2);
  CHECK(d.core.book().at(2).record.preemptions == 1);
  CHECK(d.core.book().running == std::vector<request_id>{1});
  CHECK(d.core.report().preemptions == 1);
}

TEST_CASE("scheduler core: a decode instance decodes a preallocated request once its KV is there",
          "[scheduler][scheduler_core][pd]") {
  scheduler_core_options o = opts();
  o.role = pd_role::decode;
  driver d(o);
  scheduler_orders out;
  const kv_handoff delivered{5, handoff_outcome::delivered, 100, false};
  CHECK_FALSE(d.core.on_kv_handoff(delivered, out));  // not preallocated
  preallocate_request p{arrival_of(5, {1, 2}, 1)};
  preallocation ask;
  REQUIRE_FALSE(d.core.on_preallocate(p, ask).has_value());  // the controller is asked
  CHECK(ask.req == 5);
  CHECK(ask.tokens == 32 + pd_options{}.decode_extra_blocks * 16);  // FastDeploy's enc_dec_block_num
  preallocate_reply r = d.core.on_preallocated(preallocation_result{5, true, 1, 16, 50}, p.arrival);
  CHECK(r.verdict == preallocation_verdict::granted);
  CHECK(r.device_hit_blocks == 1);
  CHECK(d.core.report().preallocations == 1);
  d.now = 500;
  REQUIRE(d.core.on_kv_handoff(delivered, d.out = {}));
  // Its one token came from P: it is done as soon as its KV is in place.
  request_done done = at<answer_order>(d.out, 0).done;
  CHECK(done.req == 5);
  CHECK(done.decode_ready_ns == 500);
  CHECK(at<timer_order>(d.out, 1).kind == timer_kind::plan);  // to release its blocks
  CHECK(d.core.book().at(5).record.first_token_ns == 100);
}

TEST_CASE("scheduler core: preallocations asked together take max_num_seqs slots, no more",
          "[scheduler][scheduler_core][pd]") {
  // The controller answers the first ask after the second has been handled (requests arriving
  // in the same trace tick): the first must already hold its slot.
  scheduler_core_options o = opts();
  o.role = pd_role::decode;
  o.options.max_num_seqs = 1;
  driver d(o);
  preallocate_request first{arrival_of(5, {1, 2}, 4)};
  preallocate_request second{arrival_of(6, {3, 4}, 4)};
  preallocation ask_first, ask_second;
  REQUIRE_FALSE(d.core.on_preallocate(first, ask_first).has_value());
  std::optional<preallocate_reply> refused = d.core.on_preallocate(second, ask_second);
  REQUIRE(refused.has_value());
  CHECK(refused->verdict == preallocation_verdict::no_slot);
  preallocate_reply r =
    d.core.on_preallocated(preallocation_result{5, true, 0, 0, 50}, first.arrival);
  CHECK(r.verdict == preallocation_verdict::granted);
  REQUIRE(d.core.on_preallocate(second, ask_second).has_value());  // the slot is still held
  // A refusal by the controller gives the slot back.
  scheduler_core_options two = o;
  two.options.max_num_seqs = 2;
  driver e(two);
  REQUIRE_FALSE(e.core.on_preallocate(first, ask_first).has_value());
  CHECK(e.core.on_preallocated(preallocation_result{5, false, 0, 0, 50}, first.arrival).verdict
        == preallocation_verdict::no_blocks);
  REQUIRE_FALSE(e.core.on_preallocate(first, ask_first).has_value());
  REQUIRE_FALSE(e.core.on_preallocate(second, ask_second).has_value());
}

TEST_CASE("scheduler core: blocks asked for but not yet answered are not offered twice",
          "[scheduler][scheduler_core][pd]") {
  scheduler_core_options o = opts();
  o.role = pd_role::decode;
  o.options.max_num_seqs = 4;
  o.device_blocks = 9;  // known free at the start
  driver d(o);
  // Each asks for its 2 prompt blocks and 2 for its output: the third finds 1 left.
  preallocation ask;
  REQUIRE_FALSE(
    d.core.on_preallocate(preallocate_request{arrival_of(5, {1, 2}, 4)}, ask).has_value());
  CHECK(ask.tokens == 32 + 2 * 16);
  REQUIRE_FALSE(
    d.core.on_preallocate(preallocate_request{arrival_of(6, {3, 4}, 4)}, ask).has_value());
  std::optional<preallocate_reply> third =
    d.core.on_preallocate(preallocate_request{arrival_of(7, {5, 6}, 4)}, ask);
  REQUIRE(third.has_value());
  CHECK(third->verdict == preallocation_verdict::no_blocks);
}

TEST_CASE("scheduler core: a prefill instance answers a storage handoff once it is visible",
          "[scheduler][scheduler_core][pd]") {
  scheduler_core_options o = opts();
  o.role = pd_role::prefill;
  o.pd.transfer = pd_transfer::storage;
  driver d(o);
  request_arrival a = arrival_of(3, {1, 2}, 8);
  a.handoff.active = true;
  d.arrive(a, 64);
  d.core.on_step_timer(0, d.out = {});
  d.core.on_probe_reply(probe_reply{1, 64, {{3, 0, 0, 0, 0, 0}}, {}}, d.out = {});
  d.grant_and_run(only<commit>(d.out), 62);
  int64_t prefill_end = d.now;
  // Its prompt is computed: its blocks are copied to host, then stored (after the copy); the
  // request is not answered yet, and its blocks stay.
  REQUIRE(d.out.size() == 3);
  engine_order d2h = at<engine_order>(d.out, 0);
  engine_order store = at<engine_order>(d.out, 1);
  CHECK(d2h.t.kind == transfer_kind::backup);
  CHECK(d2h.use == transfer_use::background);
  CHECK(store.t.kind == transfer_kind::store);
  CHECK(store.use == transfer_use::handoff_store);
  CHECK(store.t.after == std::vector<uint64_t>{d2h.t.id});
  CHECK(store.t.blocks.size() == 2);
  CHECK(at<commit>(d.out, 2).finished.empty());
  CHECK(d.core.report().handoff_blocks_sent == 2);
  d.core.on_grant(grant{2, {}, {}, 62, {}, 0, {}, {}}, d.out = {});
  d.now += 7000;
  transfer_done written{store.t.id, true, 0, {}, ""};
  d.core.on_transfer_done(transfer_use::handoff_store, 3, written, d.out = {});
  storage_order& q = only<storage_order>(d.out);
  CHECK(q.use == exists_use::handoff_visible);
  CHECK(q.query.keys.size() == 2);
  d.core.on_exists(exists_use::handoff_visible, 3, exists_reply{1}, d.out = {});
  timer_order poll = only<timer_order>(d.out);  // one block not visible yet: ask again
  CHECK(poll.kind == timer_kind::handoff);
  CHECK(poll.at_ns == d.now + visibility_poll_ns);
  d.now = poll.at_ns;
  d.core.on_handoff_timer(3, d.out = {});
  only<storage_order>(d.out);
  d.core.on_exists(exists_use::handoff_visible, 3, exists_reply{2}, d.out = {});
  request_done done = at<answer_order>(d.out, 0).done;
  CHECK(done.handoff_ok);
  CHECK(done.prefill_end_ns == prefill_end);
  CHECK(done.first_token_ns == d.now);  // emitted once every block is visible
  CHECK(at<timer_order>(d.out, 1).kind == timer_kind::plan);  // its blocks go at the next commit
}

TEST_CASE("scheduler core, GPU compute: only a step after a swap-in counts its stall as a "
          "layer wait, and the other steps' stalls are layer gaps",
          "[scheduler][scheduler_core]") {
  int64_t now = 0;
  scheduler_core core(opts(), step_compute::gpu, [&] { return now; });
  scheduler_orders out;
  commit c = commit_one(core, out);
  grant g = grant_one(c);
  g.swap_in = 5;  // the prompt's blocks come in from the host tier
  core.on_grant(g, out = {});
  CHECK(only<compute_request>(out).after_swap_in == 5);
  core.on_compute_done(c.step, 700, out = {});
  c = only<commit>(out);
  core.on_grant(grant{c.step, {}, {}, 62, {}, 0, {}, {}}, out = {});
  CHECK(only<compute_request>(out).after_swap_in == 0);
  core.on_compute_done(c.step, 40, out = {});
  scheduler_report rep = core.report();
  CHECK(rep.layer_wait_ns == 700);
  CHECK(rep.layer_gap_ns == 40);
}

TEST_CASE("scheduler core, GPU compute: a wait for copies reading reused blocks is a reuse wait, "
          "and the overhead it covered is not spun again",
          "[scheduler][scheduler_core]") {
  int64_t now = 0;
  scheduler_core_options o = opts();
  o.log_steps = true;
  scheduler_core core(o, step_compute::gpu, [&] { return now; });
  scheduler_orders out;
  commit c = commit_one(core, out);
  // The grant comes 1600 ns after the commit, when a backup still reading a reused block is
  // done: 600 ns past the 1000 ns overhead, which overlapped the wait, as in the model.
  now = 1600;
  grant g = grant_one(c);
  g.reused_ready_ns = 1600;
  core.on_grant(g, out = {});
  CHECK(only<compute_request>(out).lead_ns == 0);
  now = 5000;
  core.on_compute_done(c.step, 30, out = {});
  scheduler_report rep = core.report();
  CHECK(rep.reuse_wait_ns == 600);
  CHECK(rep.layer_wait_ns == 0);
  CHECK(rep.layer_gap_ns == 30);
  REQUIRE(rep.step_log.size() == 1);
  const step_record& s = rep.step_log[0];
  CHECK(s.start_ns == 0);
  CHECK(s.compute_ns == 1600);
  CHECK(s.end_ns == 5000);
  CHECK(s.reuse_wait_ns == 600);
  CHECK(s.swap_in == 0);
}

TEST_CASE("scheduler core, GPU compute: a grant before the overhead has passed spins the rest",
          "[scheduler][scheduler_core]") {
  int64_t now = 0;
  scheduler_core core(opts(), step_compute::gpu, [&] { return now; });
  scheduler_orders out;
  commit c = commit_one(core, out);
  now = 250;  // the host took 250 ns from commit to grant
  core.on_grant(grant_one(c), out = {});
  CHECK(only<compute_request>(out).lead_ns == 750);
  CHECK(core.report().step_log.empty());  // not asked for
}

TEST_CASE("scheduler core, modelled: a step after a swap-in starts once the host has submitted "
          "its blocks",
          "[scheduler][scheduler_core]") {
  // Two steps alike but for the swap-in's submission charge: 100 ns per block of a 10-block
  // swap-in whose layers are all in place (no stall beyond it).
  auto step_end = [](int64_t per_block, uint32_t blocks) {
    scheduler_core_options o = opts();
    o.compute.swap_in_submit_ns_per_block = per_block;
    o.log_steps = true;
    driver d(o);
    commit c = commit_one(d.core, d.out);
    grant g = grant_one(c);
    g.swap_in = 7;
    g.swap_in_blocks = blocks;
    d.core.on_grant(g, d.out = {});
    int64_t end = only<timer_order>(d.out).at_ns;
    step_record s = d.core.report().step_log.at(0);  // report() returns a copy
    CHECK(s.compute_ns == s.start_ns + per_block * blocks + 1000);  // then the 1000 ns overhead
    CHECK(s.end_ns == end);
    return end;
  };
  CHECK(step_end(100, 10) - step_end(0, 10) == 1000);
  CHECK(step_end(100, 0) == step_end(0, 0));
}
