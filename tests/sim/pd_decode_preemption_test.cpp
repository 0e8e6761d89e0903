// Preemption on a decode instance (docs/fastdeploy.md §4): the victim is dropped there, after the
// storage write that scheduler.preemption=save_to_storage asks for, and goes back through the
// router: a prefill instance computes its prompt and generated tokens again (matching what the
// write left in storage), then a decode instance finishes it. One prefill and one decode instance,
// 16-token blocks of 1024 bytes, 4 layers, 10 ns per prefill token, 100 ns per decode step, links
// of 1 byte/ns, a PD link of 100 GB/s and 100 ns per layer; times are worked out below.

#include <catch2/catch.hpp>

#include "sim/full/pd_end_checks.hpp"
#include "tests/sim/pd_scenario.hpp"

using namespace kvtier;
using namespace kvtier::test;

namespace {

instance_config member(const deployment_plan& t, pd_role role, const std::string& name,
                       uint32_t device_blocks) {
  instance_config ic = pd_member(t, role, name);
  ic.cache.device_blocks = ic.scheduler.device_blocks = device_blocks;
  return ic;
}

// D has 8 device blocks. R0 (4 prompt blocks, 20 tokens out) and R1 (1 block, 40 out) arrive
// together: D preallocates 4 + 1, P prefills both in one step (80 tokens: 800 ns, layers at 200,
// 400, 600, 800), and the last layer crosses the PD link, R0's 4 x 256 bytes in 11 ns, + 100:
// R0's KV is at D at 911, R1's a few ns later, while R0's first decode step (alone: 100 ns) runs.
// From 1011 both decode (200 ns a step); R0 takes a 5th block at its first step and a 6th at its
// 17th, R1 a 2nd at its first. At 4211 (R0's 18th step, R1's 17th) R1 needs a 3rd block and
// none is free: R1, admitted last, is preempted with 32 tokens of KV (its prompt block and one
// full generated block) and 17 tokens generated, and dropped.
deployment_plan drop_config(preemption_mode mode) {
  deployment_plan t = small_config(16, 16);
  instance_of(t).cache.policy = write_policy::write_through_selective;  // no host copies of its own accord
  instance_of(t).cache.storage = storage_write::never;
  instance_of(t).scheduler.compute.prefill_token_ns = 10;
  instance_of(t).scheduler.compute.decode_token_ns = 100;
  instance_of(t).scheduler.options.preemption = mode;
  instance_of(t).controller.preemption = mode;
  instance_of(t).cache.storage_tier = true;
  instance_of(t).controller.storage = true;
  t.storage.pool.capacity_blocks = 64;
  t.storage.pool.nodes = 1;
  t.storage.pool.read_gbps = 1;
  t.storage.pool.write_gbps = 1;
  t.storage.pool.op_latency_ns = 0;
  t.front.disaggregated = true;
  t.front.pd.transfer = pd_transfer::direct;
  t.front.pd.link_gbps = 100;
  t.front.pd.link_latency_ns = 100;
  t.front.pd.retry_decode_resource = true;  // D has no room for R1 again until R0 leaves
  t.front.pd.retry_interval_ns = 1000;
  // The worked times below have D preallocate the prompt's blocks alone: with FastDeploy's 2
  // extra blocks each, R1 would be refused at first instead of preempted later.
  t.front.pd.decode_extra_blocks = 0;
  t.front.pd.storage_namespace = instance_of(t).controller.storage_namespace;
  return deploy(t, {member(t, pd_role::prefill, "prefill-0", 16),
                    member(t, pd_role::decode, "decode-0", 8)});
}

full_result drop_run(preemption_mode mode) {
  return run_scenario(drop_config(mode),
                      {request(0, 0, {1, 2, 3, 4}, 20), request(1, 0, {5}, 40)});
}

}  // namespace

TEST_CASE("pd decode preemption: the victim is dropped on D and routed again, with exact times",
          "[actors][pd][preemption]") {
  for (preemption_mode mode : {preemption_mode::recompute, preemption_mode::save_to_storage}) {
    INFO(to_string(mode));
    bool save = mode == preemption_mode::save_to_storage;
    full_result r = drop_run(mode);
    require_clean_pd(r);
    const instance_result& p = instance_in(r, pd_role::prefill);
    const instance_result& d = instance_in(r, pd_role::decode);
    const request_record& a = record(r, 0);
    const request_record& b = record(r, 1);
    // One request each, finished once; R1's second pass is not a second request.
    CHECK(r.front_end.pushed == 2);
    CHECK(r.front_end.finished == 2);
    CHECK(r.front_end.failed == 0);
    REQUIRE(r.scheduler.requests.size() == 2);
    CHECK(r.front_end.rerouted == 1);
    CHECK(r.front_end.rerouted_saved == (save ? 1u : 0u));
    CHECK(d.scheduler.decode_drops == 1);
    CHECK(d.scheduler.preemptions == 1);
    CHECK(p.scheduler.preemptions == 0);
    CHECK(b.preemptions == 1);
    CHECK(a.preemptions == 0);
    CHECK(a.first_token_ns == 800);
    CHECK(b.first_token_ns == 800);
    // R0 never waits: 911 + 100 + 16 x 200 + 2 x 100 (alone again once R1 has left).
    CHECK(a.finish_ns == 4411);
    // R1 left D with 33 tokens to prefill (its 16-token prompt and 17 generated) and 23 to go.
    const request_record* second_p = nullptr;
    for (const request_record& q : p.scheduler.requests)
      if (q.req == 1 && q.attempt == 1)
        second_p = &q;
    REQUIRE(second_p != nullptr);
    CHECK(second_p->input_tokens == 33);
    // P still holds R1's prompt block on its device (a hit); the generated block is in storage
    // only after a save: a storage hit, else computed again.
    CHECK(second_p->first_hit_tokens[0] == 16);
    CHECK(second_p->first_hit_tokens[2] == (save ? 16u : 0u));
    CHECK(second_p->computed_tokens == (save ? 1u : 17u));
    CHECK(d.scheduler.decode_drop_writes == (save ? 1u : 0u));
    CHECK(d.scheduler.decode_drop_write_blocks == (save ? 2u : 0u));
    CHECK(d.scheduler.decode_drop_write_timeouts == 0);
    CHECK(r.controller.preemption.named_blocks == (save ? 1u : 0u));
    // TTFT is the first pass's; the end-to-end time includes the second pass; every token of
    // its output is generated once: 17 on the first pass, 23 on the second.
    CHECK(b.output_tokens == 40);
    CHECK(d.scheduler.decode_tokens == 19 + 16 + 22);
    // D's second preallocation finds its own blocks of the first pass in its tree (released
    // evictable): the prompt block, and the named generated block after a save; P sends the rest.
    CHECK(r.scheduler.handoff_blocks_skipped == (save ? 2u : 1u));
    CHECK(r.scheduler.handoff_blocks_sent == 5 + (save ? 1u : 2u));
    if (!save) {
      // Routed at once (4211), D is refused (3 blocks wanted, 2 free) until R0 has left: the
      // retry at 5211 is granted. P computes 17 tokens (5211 + 170), its last layer's 2 blocks
      // reach D 6 + 100 ns later, and R1 decodes its 22 remaining steps alone.
      CHECK(r.front_end.preallocation_refusals == 1);
      CHECK(d.scheduler.decode_drop_write_wait_ns == 0);
      CHECK(b.finish_ns == 5211 + 170 + 6 + 100 + 22 * 100);
    } else {
      // The save copies 2 blocks to host (2048 ns) and stores them (NIC, media); storage is asked
      // at 4211, +1, +3 and +7 us: visible at 11211, when R1 is routed (D has room by then). P
      // prefetches the named block from storage (media and NIC at once: 1024 ns, to 12235),
      // swaps it in layer by layer (256 ns each, the last at 13259) under its 1-token step, whose
      // last layer ends at 13263; the one block D lacks reaches it 3 + 100 ns later (13366), and
      // R1 decodes 22 steps alone.
      CHECK(r.front_end.preallocation_refusals == 0);
      CHECK(d.scheduler.decode_drop_write_wait_ns == 7000);
      CHECK(second_p->admitted_ns == 12235);
      CHECK(b.finish_ns == 15566);
    }
  }
}

TEST_CASE("pd decode preemption: the end-of-run checks hold, and each fires on corrupted results",
          "[actors][pd][preemption][invariants]") {
  full_result r = drop_run(preemption_mode::save_to_storage);
  require_clean_pd(r);
  REQUIRE(pd_end_problems(r).empty());
  auto fires = [&](auto corrupt, const std::string& what) {
    full_result bad = r;
    corrupt(bad);
    std::vector<std::string> p = pd_end_problems(bad);
    INFO(what);
    REQUIRE(p.size() == 1);
    CHECK(p[0].find(what) != std::string::npos);
  };
  fires([](full_result& x) { ++x.front_end.pushed; }, "requests pushed");
  fires([](full_result& x) { --x.front_end.rerouted; }, "routed");
  fires([](full_result& x) { --x.front_end.rerouted_saved; }, "to storage");
  fires([](full_result& x) {
          for (instance_result& i : x.instances)
            if (i.role == pd_role::decode)
              i.scheduler.requests.push_back(i.scheduler.requests.back());
        }, "twice");
  fires([](full_result& x) { x.scheduler.requests[1].failed = true; }, "both finished and failed");
  fires([](full_result& x) { x.scheduler.requests[1].finish_ns = -1; }, "have a finish");
}
