// PD handoffs with exact virtual times: one prefill and one decode instance, round numbers (16-
// token blocks of 1024 bytes, 4 layers, a prefill token costs 10 ns, a decode step 100 ns, links
// of 1 byte/ns), so every time below can be worked out by hand.

#include <catch2/catch.hpp>

#include "tests/sim/pd_scenario.hpp"

using namespace kvtier;
using namespace kvtier::test;

namespace {

deployment_plan one_p_one_d(pd_transfer mode, uint32_t decode_blocks = 16) {
  deployment_plan t = small_config(16, 0);
  instance_of(t).scheduler.compute.prefill_token_ns = 10;
  instance_of(t).scheduler.compute.decode_token_ns = 100;
  t.front.disaggregated = true;
  t.front.pd.transfer = mode;
  t.front.pd.link_gbps = 1;
  t.front.pd.link_latency_ns = 100;
  t.front.pd.storage_namespace = instance_of(t).controller.storage_namespace;
  if (mode == pd_transfer::storage) {
    t.storage.pool.capacity_blocks = 64;
    t.storage.pool.read_gbps = 1;
    t.storage.pool.write_gbps = 1;
    t.storage.pool.op_latency_ns = 0;
  }
  instance_config p = pd_member(t, pd_role::prefill, "prefill-0");
  instance_config d = pd_member(t, pd_role::decode, "decode-0");
  d.cache.device_blocks = d.scheduler.device_blocks = decode_blocks;
  return deploy(t, {p, d});
}

// The handoff settings of every instance follow the deployment's (the decode side reads its
// failure rule from its own).
deployment_plan& synced(deployment_plan& t) {
  for (instance_config& ic : t.instances) {
    double gbps = ic.scheduler.pd.link_gbps;
    ic.scheduler.pd = t.front.pd;
    ic.scheduler.pd.link_gbps = gbps;
  }
  return t;
}

}  // namespace

TEST_CASE("pd direct: each layer streams as prefill computes it, D decodes at the last",
          "[actors][pd]") {
  // 64 prompt tokens: one 640 ns prefill step, layers ending at 160, 320, 480, 640. D lacks all
  // 4 blocks: 1024 bytes per layer over the 1 byte/ns link, each layer after the one before:
  // layer 0 160 .. 1184, 1 .. 2208, 2 .. 3232, 3 .. 4256, +100 latency: KV at D at 4356.
  deployment_plan t = one_p_one_d(pd_transfer::direct);
  full_result r = run_scenario(t, {request(0, 0, {1, 2, 3, 4}, 3)});
  require_clean_pd(r);
  const request_record& x = record(r, 0);
  CHECK(x.first_token_ns == 640);
  CHECK(x.finish_ns == 4356 + 100 + 100);  // two decode steps once the KV is there
  REQUIRE(r.front_end.handoff_ns.size() == 1);
  CHECK(r.front_end.handoff_ns[0] == 4356 - 640);
  CHECK(r.scheduler.pd_link_bytes == 4 * 1024);
  CHECK(r.scheduler.handoff_blocks_sent == 4);
  // P held its blocks until the send completed; D computed nothing of the prompt.
  CHECK(instance_in(r, pd_role::prefill).scheduler.requests.at(0).finish_ns == 640);
  CHECK(instance_in(r, pd_role::decode).scheduler.prefill_tokens == 0);
  CHECK(instance_in(r, pd_role::decode).scheduler.decode_tokens == 2);
}

TEST_CASE("pd direct: a fast link hides all but the last layer behind the prefill",
          "[actors][pd]") {
  deployment_plan t = one_p_one_d(pd_transfer::direct);
  for (instance_config& ic : t.instances)
    ic.scheduler.pd.link_gbps = 100;  // 1024 bytes: 11 ns on the wire
  full_result r = run_scenario(t, {request(0, 0, {1, 2, 3, 4}, 3)});
  require_clean_pd(r);
  CHECK(record(r, 0).first_token_ns == 640);
  REQUIRE(r.front_end.handoff_ns.size() == 1);
  CHECK(r.front_end.handoff_ns[0] == 11 + 100);  // only the last layer's send is exposed
  CHECK(record(r, 0).finish_ns == 640 + 111 + 200);
}

TEST_CASE("pd direct: blocks D already holds are not sent", "[actors][pd]") {
  // The second request shares the first's 3 leading blocks, which D keeps after decoding it.
  deployment_plan t = one_p_one_d(pd_transfer::direct);
  full_result r = run_scenario(t, {request(0, 0, {1, 2, 3, 4}, 2),
                                   request(1, 100'000, {1, 2, 3, 9}, 2)});
  require_clean_pd(r);
  CHECK(r.scheduler.handoff_blocks_sent == 4 + 1);
  CHECK(r.scheduler.handoff_blocks_skipped == 3);
  CHECK(r.scheduler.pd_link_bytes == 5 * 1024);
}

TEST_CASE("pd storage: P writes every block, the partial one under its own key, and D reads them",
          "[actors][pd]") {
  // 56 prompt tokens (the 4th block holds 8): prefill ends at 560. P writes its 4 blocks:
  // D2H 4096 bytes, then over the NIC and onto the storage media at once (streaming, both at
  // 1 byte/ns): the first token comes at 560 + 2 x 4096. D reads them back: media and NIC at
  // once, then a swap-in into its preallocated blocks: decoding starts 2 x 4096 later, and two
  // decode steps follow.
  deployment_plan t = one_p_one_d(pd_transfer::storage);
  trace_request q = request(0, 0, {1, 2, 3, 4}, 3);
  q.input_tokens = 56;
  full_result r = run_scenario(t, {q});
  require_clean_pd(r);
  const request_record& x = record(r, 0);
  CHECK(x.first_token_ns == 560 + 2 * 4096);
  REQUIRE(r.front_end.handoff_ns.size() == 1);
  CHECK(r.front_end.handoff_ns[0] == 4 * 4096);
  CHECK(x.finish_ns == 560 + 4 * 4096 + 200);
  CHECK(r.storage.keys_stored == 4);
  CHECK(r.scheduler.handoff_reads == 1);
  CHECK(r.scheduler.handoff_read_failures == 0);
  CHECK(r.scheduler.pd_link_bytes == 0);
}

TEST_CASE("pd storage: a partial block is never matched as a shared prefix", "[actors][pd]") {
  // Two prefill instances prefetching from storage. The first request's partial 4th block is
  // stored under its own key: the second, whose 4th block is the full block 4, finds only the
  // 3 full blocks in storage.
  deployment_plan t = one_p_one_d(pd_transfer::storage);
  t.front.router.session_affinity = false;
  instance_config second = t.instances[0];
  second.name = "prefill-1";
  t.instances.insert(t.instances.begin() + 1, second);
  for (instance_config& ic : t.instances) {
    ic.cache.host_blocks = 16;  // prefetched blocks land in host memory
    ic.controller.storage = true;
  }
  trace_request q = request(0, 0, {1, 2, 3, 4}, 2);
  q.input_tokens = 56;
  full_result r = run_scenario(t, {q, request(1, 1'000'000, {1, 2, 3, 4}, 2)});
  require_clean_pd(r);
  CHECK(r.front_end.per_instance[0] == 1);
  CHECK(r.front_end.per_instance[1] == 1);
  CHECK(record(r, 1).first_hit_blocks[2] == 3);
}

TEST_CASE("pd: a failed handoff ends in error under on_handoff_failure = error",
          "[actors][pd][faults]") {
  for (pd_transfer mode : {pd_transfer::direct, pd_transfer::storage}) {
    deployment_plan t = one_p_one_d(mode);
    t.front.pd.failure_rate = 1;
    full_result r = run_scenario(synced(t), {request(0, 0, {1, 2, 3, 4}, 3)});
    require_clean_pd(r);  // D gave its preallocated blocks back
    CHECK(r.front_end.failed == 1);
    CHECK(r.front_end.finished == 0);
    CHECK(r.front_end.injected_failures == 1);
    CHECK(r.front_end.handoff_failures == 1);
    CHECK(r.front_end.recomputed == 0);
    CHECK(record(r, 0).failed);
    CHECK(record(r, 0).finish_ns == -1);
  }
}

TEST_CASE("pd: a failed handoff is recomputed on D under on_handoff_failure = recompute",
          "[actors][pd][faults]") {
  // P's send completes at 4356 (as in the direct case above); D learns the KV is unusable and
  // computes prompt and first token (65 tokens, 650 ns), sampling the 2nd, then decodes the 3rd.
  deployment_plan t = one_p_one_d(pd_transfer::direct);
  t.front.pd.failure_rate = 1;
  t.front.pd.on_failure = handoff_failure_rule::recompute;
  full_result r = run_scenario(synced(t), {request(0, 0, {1, 2, 3, 4}, 3)});
  require_clean_pd(r);
  CHECK(r.front_end.finished == 1);
  CHECK(r.front_end.failed == 0);
  CHECK(r.front_end.recomputed == 1);
  CHECK(record(r, 0).finish_ns == 4356 + 650 + 100);
  CHECK(instance_in(r, pd_role::decode).scheduler.prefill_tokens == 65);
}

TEST_CASE("pd storage: a handed-off block evicted before D reads it fails the handoff",
          "[actors][pd][faults]") {
  for (handoff_failure_rule rule : {handoff_failure_rule::error, handoff_failure_rule::recompute}) {
    deployment_plan t = one_p_one_d(pd_transfer::storage);
    t.storage.pool.capacity_blocks = 2;  // P's 4 blocks do not all stay
    t.front.pd.on_failure = rule;
    full_result r = run_scenario(synced(t), {request(0, 0, {1, 2, 3, 4}, 3)});
    require_clean_pd(r);
    CHECK(r.scheduler.handoff_read_failures == 1);
    CHECK(r.front_end.injected_failures == 0);
    CHECK(r.front_end.handoff_failures == 1);
    if (rule == handoff_failure_rule::error) {
      CHECK(r.front_end.failed == 1);
    } else {
      CHECK(r.front_end.finished == 1);
      CHECK(r.front_end.recomputed == 1);
    }
  }
}

TEST_CASE("pd: D refuses a preallocation it has no room for, and P waits, then fails or retries",
          "[actors][pd]") {
  // D has 6 blocks: the first request takes 4 (plus one more to decode), the second, at the
  // same instant, finds 2 free and is refused.
  for (bool retry : {false, true}) {
    deployment_plan t = one_p_one_d(pd_transfer::direct, 6);
    t.front.pd.wait_decode_resource_ns = 1000;
    t.front.pd.retry_decode_resource = retry;
    t.front.pd.retry_interval_ns = 1000;
    full_result r = run_scenario(synced(t), {request(0, 0, {1, 2, 3, 4}, 3),
                                     request(1, 0, {5, 6, 7, 8}, 3)});
    require_clean_pd(r);
    CHECK(r.front_end.preallocation_refusals >= 1);
    if (!retry) {
      CHECK(r.front_end.decode_resource_timeouts == 1);
      CHECK(r.front_end.failed == 1);
      CHECK(record(r, 1).failed);
      CHECK(record(r, 1).admitted_ns == -1);  // never prefilled
    } else {
      CHECK(r.front_end.decode_resource_timeouts == 0);
      CHECK(r.front_end.finished == 2);
      // asked every 1000 ns until the first request left D at 4556
      CHECK(r.front_end.preallocation_refusals == 5);
      CHECK(record(r, 1).admitted_ns == 5000);
    }
  }
}

TEST_CASE("pd storage: P waits for blocks another put is still writing before the first token",
          "[actors][pd]") {
  // P's write-through already stores every computed block (host copy, then storage), so its
  // handoff's put finds the blocks in flight and does not write them twice; until that put
  // completes they are invisible, and D's read would miss them.
  deployment_plan t = one_p_one_d(pd_transfer::storage);
  t.storage.pool.write_gbps = 0.01;  // the write-through's put takes 100 us per block
  for (instance_config& ic : t.instances) {
    ic.cache.host_blocks = 16;
    ic.cache.storage = storage_write::always;
    ic.cache.storage_tier = true;
    ic.controller.storage = true;
  }
  full_result r = run_scenario(t, {request(0, 0, {1, 2, 3, 4}, 3)});
  require_clean_pd(r);
  CHECK(r.front_end.finished == 1);
  CHECK(r.scheduler.handoff_read_failures == 0);
  CHECK(r.storage.put_in_flight > 0);  // the race happened
  CHECK(record(r, 0).first_token_ns > 640 + 4 * 102'400);  // after the slow put, not before
}
