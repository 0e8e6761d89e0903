// Preemption modes (scheduler.preemption) and storage prefetch policies (storage.prefetch_*):
// small timed replays whose times are worked out by hand, and the controller's bookkeeping.

#include <catch2/catch.hpp>

#include "model/controller/controller_core.hpp"
#include "model/storage/storage_index.hpp"
#include "tests/sim/scenario.hpp"

using namespace kvtier;
using namespace kvtier::test;

namespace {

void with_storage(deployment_plan& c, uint32_t blocks) {
  instance_of(c).cache.storage_tier = true;
  instance_of(c).controller.storage = true;
  c.storage.pool.capacity_blocks = blocks;
  c.storage.pool.nodes = 1;
  c.storage.pool.read_gbps = 1;   // 1 byte/ns: a 1024-byte block in 1024 ns
  c.storage.pool.write_gbps = 1;
  c.storage.pool.op_latency_ns = 0;
}

// Six device blocks. R0 (4 prompt blocks, 20 tokens out) and R1 (2 blocks, 20 out) arrive
// together and fill the device; R0's first decode needs a fifth block, so R1 (admitted last)
// is preempted. write_through_selective backs nothing up on its own (each block has one hit),
// so whatever R1 keeps is the preemption mode's doing.
full_result preemption_run(preemption_mode mode) {
  deployment_plan c = small_config(6, 16);
  instance_of(c).cache.policy = write_policy::write_through_selective;
  instance_of(c).cache.storage = storage_write::never;
  if (mode == preemption_mode::save_to_storage)
    with_storage(c, 64);
  instance_of(c).scheduler.options.preemption = mode;
  instance_of(c).controller.preemption = mode;
  compute_profile& p = instance_of(c).scheduler.compute;
  p.step_overhead_ns = 1000;
  p.prefill_token_ns = 10;
  p.decode_token_ns = 1000;
  return run_scenario(c, {request(0, 0, {1, 2, 3, 4}, 20), request(1, 0, {10, 11}, 20)});
}

}  // namespace

TEST_CASE("preemption: the three modes, with exact virtual times", "[actors][replay][preemption]") {
  // Step 1 prefills 96 tokens: 1000 + 960 ns; both sample their first token at 1960. At 1960
  // R0 needs a fifth block: R1 is preempted with 32 tokens of KV (its sampled token has none).
  full_result re = preemption_run(preemption_mode::recompute);
  require_clean(re);
  const request_record& a = record(re, 0);
  const request_record& b = record(re, 1);
  CHECK(a.first_token_ns == 1960);
  CHECK(b.first_token_ns == 1960);
  CHECK(re.scheduler.preemptions == 1);
  CHECK(b.preemptions == 1);
  // recompute: R1's blocks are released, one is taken by R0's growth at once and the other by
  // its growth at token 81. R0 decodes 19 steps of 2000 ns; then R1 computes its 33 tokens
  // again (1000 + 330) and decodes 18 steps.
  CHECK(a.finish_ns == 1960 + 19 * 2000);
  CHECK(b.hit_blocks == std::array<uint32_t, 3>{0, 0, 0});
  CHECK(b.finish_ns == a.finish_ns + 1330 + 18 * 2000);
  CHECK(re.scheduler.recomputed_tokens == 32);
  CHECK(re.scheduler.restored_tokens == std::array<uint64_t, 3>{0, 0, 0});
  CHECK(re.controller.preemption.saved_blocks == 0);
  CHECK(re.scheduler.layer_wait_ns == 0);

  for (preemption_mode mode : {preemption_mode::save_to_storage, preemption_mode::swap_to_host}) {
    INFO(to_string(mode));
    full_result r = preemption_run(mode);
    require_clean(r);
    const request_record& x = record(r, 0);
    const request_record& y = record(r, 1);
    // Both blocks of R1 are copied to host (one D2H, 2048 ns from 1960). R0's growth takes one
    // of them at once: the reuse barrier holds R0's decode until the copy is done (4008), past
    // its 1000 ns overhead: 1048 ns later than under recompute.
    CHECK(r.controller.preemption.saved_blocks == 2);
    CHECK(r.controller.preemption.d2h_blocks == 2);
    CHECK(x.finish_ns == 1960 + 19 * 2000 + 1048);
    // R1 comes back from host (32 tokens swapped in) and recomputes nothing: its re-admission
    // step at R0's finish S is its missing token, a decode step (1000 + 4 layers of 250 ns).
    // Its swap-in lands layer i at S + 512 (i + 1) (2 blocks x 256 bytes per layer): layers 2 and
    // 3 wait 36 and 262 ns, so the step ends at S + 2298; then 18 decode steps.
    CHECK(y.hit_blocks == std::array<uint32_t, 3>{0, 2, 0});
    CHECK(r.scheduler.recomputed_tokens == 0);
    CHECK(r.scheduler.restored_tokens == std::array<uint64_t, 3>{0, 32, 0});
    CHECK(y.finish_ns == x.finish_ns + 2298 + 18 * 2000);
    CHECK(r.scheduler.layer_wait_ns == 36 + 262);
    CHECK(r.scheduler.reuse_wait_ns == 1048);  // R0's decode behind the victims' copy
    CHECK(r.controller.preemption.stored_blocks
          == (mode == preemption_mode::save_to_storage ? 2u : 0u));
  }
}

namespace {

// Under write_back, R0's blocks 1, 2 reach host (and storage) when R1's four blocks evict them
// from the device; R2's four blocks then push R1's to host, which evicts 1, 2 there. R3 shares
// 1, 2, which only storage holds now, and arrives at 2 ms: it prefetches them (two 1024-byte
// blocks, storage media and NIC at 1 byte/ns).
full_result prefetch_run(prefetch_policy policy, int64_t timeout_ns = 0, uint64_t threshold = 0) {
  deployment_plan c = small_config(4, 4);
  instance_of(c).cache.policy = write_policy::write_back;
  instance_of(c).cache.storage = storage_write::always;
  with_storage(c, 64);
  instance_of(c).controller.prefetch = policy;
  instance_of(c).controller.prefetch_timeout_ns = timeout_ns;
  instance_of(c).controller.prefetch_timeout_per_ki_token_ns = 0;
  instance_of(c).controller.prefetch_threshold_tokens = threshold;
  compute_profile& p = instance_of(c).scheduler.compute;
  p.step_overhead_ns = 1000;
  p.prefill_token_ns = 100;
  return run_scenario(c, {request(0, 0, {1, 2}, 1), request(1, 1'000'000, {3, 4, 5, 6}, 1),
                          request(2, 1'500'000, {8, 9, 10, 11}, 1),
                          request(3, 2'000'000, {1, 2, 7}, 1)});
}

}  // namespace

TEST_CASE("prefetch: each policy, worked out by hand", "[actors][replay][prefetch]") {
  // wait_complete: R3 is ready once both blocks landed: storage media and NIC at once (they
  // stream), 2048 ns each.
  full_result wait = prefetch_run(prefetch_policy::wait_complete);
  require_clean(wait);
  const request_record& w = record(wait, 3);
  CHECK(w.ready_ns == 2'000'000 + 2048);
  CHECK(w.admitted_ns == w.ready_ns);
  CHECK(w.hit_blocks == std::array<uint32_t, 3>{0, 0, 2});
  // Its step computes 16 tokens (1000 + 4 layers of 400 ns). The device blocks its two hits
  // swap into are R2's, written back first (2048 ns); the swap-in then lands a layer every
  // 512 ns (2 x 256 bytes): layer 0 at +2560 waits 1560 ns, layers 1-3 112 ns each.
  CHECK(w.first_token_ns == w.ready_ns + 2560 + 400 + 3 * 512);
  CHECK(wait.controller.prefetch.started == 1);
  CHECK(wait.controller.prefetch.ready_early == 0);
  // best_effort: ready (and admitted) at once; nothing has landed, so all 48 tokens compute.
  full_result best = prefetch_run(prefetch_policy::best_effort);
  require_clean(best);
  const request_record& b = record(best, 3);
  CHECK(b.ready_ns == 2'000'000);
  CHECK(b.admitted_ns == 2'000'000);
  CHECK(b.hit_blocks == std::array<uint32_t, 3>{0, 0, 0});
  // 48 tokens: 1000 + 4800 ns, layer 0 waiting for the write-back of R2's blocks it reuses.
  CHECK(b.first_token_ns == 2'000'000 + 2048 + 4800);
  CHECK(best.controller.prefetch.ready_early == 1);
  CHECK(best.controller.loads == 2);  // the loads still ran, and landed after its admission
  // timeout: 500 ns (no per-token allowance) passes before the loads land: ready at the
  // deadline, and the step runs 500 ns after best_effort's.
  full_result early = prefetch_run(prefetch_policy::timeout, 500);
  require_clean(early);
  const request_record& e = record(early, 3);
  CHECK(e.ready_ns == 2'000'500);
  CHECK(e.hit_blocks == std::array<uint32_t, 3>{0, 0, 0});
  CHECK(e.first_token_ns == b.first_token_ns + 500);
  CHECK(early.controller.prefetch.timeouts == 1);
  // A deadline of 1 ms lets the loads land first: as wait_complete.
  full_result late = prefetch_run(prefetch_policy::timeout, 1'000'000);
  require_clean(late);
  CHECK(record(late, 3).ready_ns == w.ready_ns);
  CHECK(record(late, 3).hit_blocks == w.hit_blocks);
  CHECK(record(late, 3).first_token_ns == w.first_token_ns);
  CHECK(late.controller.prefetch.timeouts == 0);
  // A threshold of 48 tokens: the 32-token match is not loaded.
  full_result skip = prefetch_run(prefetch_policy::wait_complete, 0, 48);
  require_clean(skip);
  CHECK(record(skip, 3).ready_ns == 2'000'000);
  CHECK(record(skip, 3).hit_blocks == std::array<uint32_t, 3>{0, 0, 0});
  CHECK(record(skip, 3).first_token_ns == 2'000'000 + 3072 + 4800);  // three blocks written back
  CHECK(skip.controller.prefetch.below_threshold == 1);
  CHECK(skip.controller.loads == 0);
}

// -- the controller's bookkeeping ------------------------------------------------------------

namespace {

std::vector<cache_block> blocks_of(std::vector<uint64_t> ids) {
  std::vector<cache_block> out;
  map_trace_blocks(7, ids.data(), ids.size(), static_cast<uint32_t>(ids.size()) * 16, 16, 16, out);
  return out;
}

controller_options core_options(preemption_mode mode) {
  controller_options o;
  o.block_size = 16;
  o.layers = 4;
  o.storage = true;
  o.preemption = mode;
  return o;
}

struct core_rig {
  controller_core core;
  std::vector<transfer> out;
  std::vector<request_id> landed;
  uint64_t step = 0;

  core_rig(const cache_options& cache, const controller_options& o) : core(cache, o) {}

  grant commit_step(commit c, step_inputs* inputs = nullptr) {
    grant g;
    step_inputs in;
    c.step = ++step;
    core.on_commit(c, g, out, in);
    if (inputs)
      *inputs = in;
    return g;
  }
  void settle() {  // completes every transfer, follow-ups included
    while (!out.empty()) {
      std::vector<transfer> now = std::move(out);
      out.clear();
      for (const transfer& t : now)
        core.on_transfer_done(transfer_done{t.id, true, 0, {}, ""}, out, landed);
    }
  }
};

cache_options small_cache(uint32_t device, uint32_t host, write_policy p) {
  cache_options c;
  c.device_blocks = device;
  c.host_blocks = host;
  c.policy = p;
  c.storage = storage_write::never;
  c.storage_tier = true;
  return c;
}

}  // namespace

TEST_CASE("preemption: the reuse barrier holds a step computing into a block a save reads",
          "[actors][controller][preemption]") {
  core_rig rig(small_cache(2, 4, write_policy::write_through_selective),
               core_options(preemption_mode::save_to_storage));
  controller_core& core = rig.core;
  core.on_arrival(1, blocks_of({1, 2}));
  REQUIRE(rig.commit_step(commit{0, {}, {}, {}, {}, {{1, 32}}}).admits.at(0).admitted);
  // A computed both blocks and is preempted; B is admitted in the same step and takes A's
  // device blocks, which the save's D2H still reads.
  core.on_arrival(2, blocks_of({3, 4}));
  step_inputs in;
  grant g = rig.commit_step(commit{0, {{1, 32}}, {}, {{1, 32}}, {}, {{2, 32}}}, &in);
  REQUIRE(g.admits.at(0).admitted);
  CHECK(core.report().preemption.saved_blocks == 2);
  CHECK(core.report().preemption.d2h_blocks == 2);
  REQUIRE(in.written.size() == 2);
  for (block_id b : in.written)
    CHECK(core.preemption_reads().contains(b));
  CHECK(in.barriers.size() == 1);  // B's step waits for the save's D2H
  // Starting B's step now breaks the barrier: both checks fire for each block.
  core.check_step_start(in);
  CHECK(core.report().invariant_violations == 4);
  bool named = false;
  for (const std::string& m : core.report().invariant_messages)
    named = named || m.find("reuse barrier") != std::string::npos;
  CHECK(named);
  rig.settle();  // the D2H lands, then the stores it was saving for
  CHECK(core.preemption_reads().empty());
  CHECK(core.report().preemption.stored_blocks == 2);
  core.check_step_start(in);
  CHECK(core.report().invariant_violations == 4);  // nothing new once the copy is done
}

TEST_CASE("preemption: the barrier's ledger fires when a block it names is not pinned",
          "[actors][controller][preemption][invariants]") {
  core_rig rig(small_cache(4, 4, write_policy::write_through_selective),
               core_options(preemption_mode::swap_to_host));
  controller_core& core = rig.core;
  core.on_arrival(1, blocks_of({1, 2}));
  rig.commit_step(commit{0, {}, {}, {}, {}, {{1, 32}}});
  rig.commit_step(commit{0, {{1, 32}}, {}, {{1, 32}}, {}, {}});
  REQUIRE(core.preemption_reads().size() == 2);
  core.check(false);
  CHECK(core.report().invariant_violations == 0);
  // Corrupt the ledger: it names a free, unpinned block as read by a save.
  block_id unpinned = 3;
  REQUIRE(core.model().pool(tier::device).pins(unpinned) == 0);
  core.preemption_reads_for_test()[unpinned] = 999;
  core.check(false);
  CHECK(core.report().invariant_violations == 1);
  CHECK(core.report().invariant_messages.back().find("reuse barrier") != std::string::npos);
  core.preemption_reads_for_test().erase(unpinned);
  rig.settle();
  CHECK(core.preemption_reads().empty());
  core.check(false);
  CHECK(core.report().invariant_violations == 1);  // nothing more
}

TEST_CASE("preemption: save_to_storage finds a victim's blocks in storage at re-admission",
          "[actors][controller][preemption][storage]") {
  core_rig rig(small_cache(2, 2, write_policy::write_back),
               core_options(preemption_mode::save_to_storage));
  controller_core& core = rig.core;
  std::vector<cache_block> a = blocks_of({1, 2});
  core.on_arrival(1, a);
  rig.commit_step(commit{0, {}, {}, {}, {}, {{1, 32}}});
  rig.commit_step(commit{0, {{1, 32}}, {}, {{1, 32}}, {}, {}});  // preempted: D2H, then stores
  rig.settle();
  CHECK(core.report().preemption.stored_blocks == 2);
  // B and then C run: under write_back, C's admission writes B's blocks back to host, which
  // evicts A's host copies. A's blocks are now in storage only.
  core.on_arrival(2, blocks_of({3, 4}));
  rig.commit_step(commit{0, {}, {}, {}, {}, {{2, 32}}});
  rig.commit_step(commit{0, {{2, 32}}, {2}, {}, {}, {}});
  rig.settle();
  core.on_arrival(3, blocks_of({5, 6}));
  rig.commit_step(commit{0, {}, {}, {}, {}, {{3, 32}}});
  rig.commit_step(commit{0, {{3, 32}}, {3}, {}, {}, {}});
  rig.settle();
  CHECK(core.model().tree().find(a[0].hash) == root_node);
  // Re-admission: the lookup asks storage for both blocks, which load into host.
  std::vector<uint64_t> keys = core.on_readmission(1);
  CHECK(keys.size() == 2);
  REQUIRE(core.on_exists(1, 2, rig.out));
  rig.settle();
  CHECK(rig.landed == std::vector<request_id>{1});
  grant g = rig.commit_step(commit{0, {}, {}, {}, {}, {{1, 32}}});
  REQUIRE(g.admits.at(0).admitted);
  CHECK(g.admits[0].storage_blocks == 2);
  CHECK(g.admits[0].storage_tokens == 32);
  rig.settle();
  rig.commit_step(commit{0, {{1, 32}}, {1}, {}, {}, {}});
  rig.settle();
  core.check(true);
  CHECK(core.report().invariant_violations == 0);
  CHECK(core.report().preemption.readmission_lookups == 1);
  CHECK(core.idle());
}

TEST_CASE("preemption: generated blocks get names and are saved with the prompt",
          "[actors][controller][preemption]") {
  core_rig rig(small_cache(8, 8, write_policy::write_through_selective),
               core_options(preemption_mode::swap_to_host));
  controller_core& core = rig.core;
  core.on_arrival(1, blocks_of({1, 2}));
  // 32 prompt tokens and 40 generated ones with KV: blocks 3 and 4 (tokens 32..63) are full
  // generated blocks, block 5 (64..71) is partial and is not saved.
  rig.commit_step(commit{0, {}, {}, {}, {}, {{1, 72}}});
  rig.commit_step(commit{0, {{1, 72}}, {}, {{1, 72}}, {}, {}});
  CHECK(core.report().preemption.named_blocks == 2);
  CHECK(core.report().preemption.saved_blocks == 4);
  rig.settle();
  std::vector<cache_block> named = blocks_of({1, 2});
  name_private_blocks(1, 2, 16, named);
  prefix_hit hit = core.lookup(named);
  CHECK(hit.device_blocks + hit.host_blocks == 4);
  CHECK(hit.host_blocks == 0);  // still on the device (with host copies behind them)
  // Admitted again with 73 tokens of target, it finds all four.
  grant g = rig.commit_step(commit{0, {}, {}, {}, {}, {{1, 73}}});
  REQUIRE(g.admits.at(0).admitted);
  CHECK(g.admits[0].device_blocks == 4);
  CHECK(g.admits[0].device_tokens == 64);
  rig.commit_step(commit{0, {{1, 73}}, {1}, {}, {}, {}});
  rig.settle();
  core.check(true);
  CHECK(core.report().invariant_violations == 0);
  CHECK(core.idle());
}

TEST_CASE("preemption: the bytes a save adds are those the write policy would not have moved",
          "[actors][controller][preemption]") {
  // A request computes 2 prompt blocks and 2 full generated ones and is preempted in the same
  // commit: the save copies all four, its prompt blocks' backups queued by the commit among them.
  // Under write_through those two would have been copied (and, storage_write=always, stored)
  // anyway; under write_through_selective (one hit each, below the threshold) with
  // storage_write=always they would have been staged through host memory and stored when the
  // request finishes: in both, only the named generated blocks are the save's. With
  // storage_write=on_host_evict, selective would never have copied them: all four are the
  // save's (docs/preemption.md, "What saving costs").
  struct expected { write_policy policy; storage_write storage; uint32_t d2h, stored; };
  for (expected e : {expected{write_policy::write_through, storage_write::always, 2, 2},
                     expected{write_policy::write_through_selective, storage_write::always, 2, 2},
                     expected{write_policy::write_through_selective, storage_write::on_host_evict,
                              4, 4}}) {
    INFO(to_string(e.policy) << " storage_write " << static_cast<int>(e.storage));
    cache_options cache = small_cache(8, 8, e.policy);
    cache.storage = e.storage;
    core_rig rig(cache, core_options(preemption_mode::save_to_storage));
    controller_core& core = rig.core;
    core.on_arrival(1, blocks_of({1, 2}));
    rig.commit_step(commit{0, {}, {}, {}, {}, {{1, 72}}});
    rig.commit_step(commit{0, {{1, 72}}, {}, {{1, 72}}, {}, {}});
    rig.settle();
    const preemption_io& p = core.report().preemption;
    CHECK(p.named_blocks == 2);
    CHECK(p.d2h_blocks == 4);
    CHECK(p.marginal_d2h_blocks == e.d2h);
    CHECK(p.marginal_stored_blocks == e.stored);
  }
}

TEST_CASE("prefetch: a protected prefetch keeps its blocks until admission, up to capacity",
          "[actors][controller][prefetch]") {
  for (uint32_t capacity : {0u, 2u}) {
    INFO("capacity " << capacity);
    controller_options o = core_options(preemption_mode::recompute);
    o.prefetch_capacity_blocks = capacity;
    core_rig rig(small_cache(4, 2, write_policy::write_through_selective), o);
    controller_core& core = rig.core;
    // D runs (so that protection is not let go for want of anything running).
    core.on_arrival(9, blocks_of({90}));
    REQUIRE(rig.commit_step(commit{0, {}, {}, {}, {}, {{9, 16}}}).admits.at(0).admitted);
    // A's two blocks are in storage: they land in host memory.
    std::vector<cache_block> a = blocks_of({1, 2});
    CHECK(core.on_arrival(1, a).size() == 2);
    REQUIRE(core.on_exists(1, 2, rig.out));
    rig.settle();
    CHECK(rig.landed == std::vector<request_id>{1});
    // C's prefetch wants the host tier's two blocks too.
    CHECK(core.on_arrival(3, blocks_of({5, 6})).size() == 2);
    bool c_loads = core.on_exists(3, 2, rig.out);
    rig.settle();
    grant g = rig.commit_step(commit{0, {}, {}, {}, {}, {{1, 33}}});
    REQUIRE(g.admits.at(0).admitted);
    if (capacity == 0) {
      CHECK(c_loads);  // A's landed blocks were evicted for C's
      CHECK(g.admits[0].storage_blocks == 0);
      CHECK(core.report().prefetch.protected_holds == 0);
    } else {
      CHECK_FALSE(c_loads);  // protected: C finds no room
      CHECK(g.admits[0].storage_blocks == 2);
      CHECK(core.report().prefetch.protected_holds == 1);
    }
    core.check(false);
    CHECK(core.report().invariant_violations == 0);
  }
}

TEST_CASE("preemption: a decode instance's victim is saved, released and forgotten in one commit",
          "[actors][controller][preemption][pd]") {
  core_rig rig(small_cache(8, 8, write_policy::write_through_selective),
               core_options(preemption_mode::save_to_storage));
  controller_core& core = rig.core;
  uint32_t free_at_start = core.model().device_available();
  core.on_arrival(1, blocks_of({1, 2}));
  // 32 prompt tokens and 24 generated with KV: block 3 (tokens 32..47) is a full generated block
  // and gets a name; the partial 4th is not saved.
  rig.commit_step(commit{0, {}, {}, {}, {}, {{1, 56}}});
  commit drop{0, {{1, 56}}, {}, {{1, 56}}, {}, {}};
  drop.drop_preempted = true;
  grant g = rig.commit_step(drop);
  CHECK(core.report().preemption.named_blocks == 1);
  CHECK(core.report().preemption.saved_blocks == 3);
  // The keys its save writes, in block order: what the decode instance waits to see in storage.
  REQUIRE(g.dropped_key_counts == std::vector<uint32_t>{3});
  std::vector<cache_block> named = blocks_of({1, 2});
  name_private_blocks(1, 1, 16, named);
  REQUIRE(g.dropped_keys.size() == 3);
  for (size_t i = 0; i < 3; ++i)
    CHECK(g.dropped_keys[i] == make_storage_key(core.options().storage_namespace, named[i].hash));
  // Nothing is held for it (its blocks are evictable copies), and it is forgotten: the controller
  // is idle once the copies are done, and the same id may come again.
  rig.settle();
  CHECK(core.idle());
  CHECK(core.model().device_available() == free_at_start);
  core.check(true);
  CHECK(core.report().invariant_violations == 0);
  core.on_arrival(1, named);
  grant again = rig.commit_step(commit{0, {}, {}, {}, {}, {{1, 57}}});
  REQUIRE(again.admits.at(0).admitted);
  CHECK(again.admits[0].device_blocks == 3);  // its own blocks, the named one included
  rig.commit_step(commit{0, {{1, 57}}, {1}, {}, {}, {}});
  rig.settle();
  core.check(true);
  CHECK(core.report().invariant_violations == 0);
  CHECK(core.idle());
}

TEST_CASE("controller: a request arriving again before its last pass's release lets that pass go",
          "[actors][controller][pd]") {
  // A prefill instance may see a dropped request again before the commit releasing its previous
  // pass was sent: the arrival releases that pass's blocks, and nothing leaks.
  core_rig rig(small_cache(4, 0, write_policy::write_through_selective),
               core_options(preemption_mode::recompute));
  controller_core& core = rig.core;
  core.on_arrival(1, blocks_of({1, 2}));
  rig.commit_step(commit{0, {}, {}, {}, {}, {{1, 32}}});
  rig.commit_step(commit{0, {{1, 32}}, {}, {}, {}, {}});
  CHECK(core.model().device_available() == 2);  // held by the first pass
  core.on_arrival(1, blocks_of({1, 2, 3}));
  CHECK(core.model().device_available() == 4);  // released: evictable copies
  grant g = rig.commit_step(commit{0, {}, {}, {}, {}, {{1, 48}}});
  REQUIRE(g.admits.at(0).admitted);
  CHECK(g.admits[0].device_blocks == 2);
  rig.commit_step(commit{0, {{1, 48}}, {1}, {}, {}, {}});
  rig.settle();
  core.check(true);
  CHECK(core.report().invariant_violations == 0);
  CHECK(core.idle());
}
