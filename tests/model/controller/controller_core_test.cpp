#include "model/controller/controller_core.hpp"

#include <catch2/catch.hpp>

using namespace kvtier;

namespace {

std::vector<cache_block> blocks_of(std::vector<uint64_t> ids) {
  std::vector<cache_block> out;
  map_trace_blocks(7, ids.data(), ids.size(), static_cast<uint32_t>(ids.size()) * 16, 16, 16, out);
  return out;
}

controller_options opts() {
  controller_options o;
  o.block_size = 16;
  o.layers = 4;
  return o;
}

transfer_done done(const transfer& t) {
  return transfer_done{t.id, true, 0, {}, ""};
}

}  // namespace

TEST_CASE("controller: under write_back, a step computing into an evicted block waits for its D2H",
          "[actors][controller][write_policy]") {
  cache_options cache;
  cache.device_blocks = 2;
  cache.host_blocks = 4;
  cache.policy = write_policy::write_back;
  controller_core core(cache, opts());
  std::vector<transfer> out;
  std::vector<request_id> landed;
  // A computes blocks 1, 2 and finishes: both stay cached on the device, unreferenced.
  CHECK(core.on_arrival(1, blocks_of({1, 2})).empty());
  grant g;
  step_inputs in;
  core.on_commit(commit{1, {}, {}, {}, {}, {{1, 32}}}, g, out, in);
  REQUIRE(g.admits.at(0).admitted);
  CHECK(out.empty());
  CHECK(in.barriers.empty());
  core.on_commit(commit{2, {{1, 32}}, {1}, {}, {}, {}}, g = {}, out, in = {});
  // B needs two blocks: A's are written back to host and handed to B at once.
  core.on_arrival(2, blocks_of({3, 4}));
  core.on_commit(commit{3, {}, {}, {}, {}, {{2, 32}}}, g = {}, out, in = {});
  REQUIRE(g.admits.at(0).admitted);
  REQUIRE(out.size() == 1);
  CHECK(out[0].kind == transfer_kind::write_back);
  CHECK(in.written.size() == 2);
  CHECK(in.barriers == std::vector<uint64_t>{out[0].id});  // the step must wait for it
  for (block_id b : in.written)
    CHECK(core.model().pool(tier::device).pins(b) == 1);
  // Starting the step now would compute into blocks a D2H still reads: the check says so.
  core.check_step_start(in);
  CHECK(core.report().invariant_violations == 2);  // one per block
  core.on_transfer_done(done(out[0]), out, landed);
  for (block_id b : in.written)
    CHECK(core.model().pool(tier::device).pins(b) == 0);
  core.check_step_start(in);
  CHECK(core.report().invariant_violations == 2);  // no new one once the D2H is done
}

TEST_CASE("controller: a probe reports matches, availability and what victims would free",
          "[actors][controller]") {
  cache_options cache;
  cache.device_blocks = 4;
  controller_core core(cache, opts());
  std::vector<transfer> out;
  grant g;
  step_inputs in;
  core.on_arrival(1, blocks_of({1, 2, 3}));
  core.on_arrival(2, blocks_of({1, 2, 9}));
  core.on_commit(commit{1, {}, {}, {}, {}, {{1, 48}}}, g, out, in);
  core.on_commit(commit{2, {{1, 48}}, {}, {}, {}, {}}, g = {}, out, in = {});  // 1, 2, 3 cached
  probe p;
  p.step = 3;
  p.candidates = {2};
  p.grow_blocks = 5;  // more than the one free block
  p.victims = {1};
  probe_reply r = core.on_probe(p);
  REQUIRE(r.matches.size() == 1);
  CHECK(r.matches[0].device_blocks == 2);  // blocks 1, 2 shared with request 1
  CHECK(r.matches[0].device_tokens == 32);
  CHECK(r.available_blocks == 1);
  REQUIRE(r.victim_frees.size() == 1);
  CHECK(r.victim_frees[0] == 3);  // request 1 alone holds its three blocks
  CHECK(r.matches[0].idle_device_blocks == 0);  // held by request 1
  core.on_commit(commit{3, {}, {1}, {}, {}, {}}, g = {}, out, in = {});
  // Nobody holds 1, 2 now: they count as available, and admitting request 2 takes them out.
  p.grow_blocks = 0;
  p.victims.clear();
  r = core.on_probe(p);
  CHECK(r.available_blocks == 4);
  CHECK(r.matches[0].idle_device_blocks == 2);
  core.on_commit(commit{4, {}, {}, {}, {}, {{2, 48}}}, g = {}, out, in = {});
  CHECK(g.admits.at(0).device_blocks == 2);
  core.on_commit(commit{5, {{2, 48}}, {2}, {}, {}, {}}, g = {}, out, in = {});
  core.check(true);
  CHECK(core.report().invariant_violations == 0);
  CHECK(core.idle());
}

TEST_CASE("controller: a storage prefetch holds its prefix only while it loads",
          "[actors][controller][storage]") {
  cache_options cache;
  cache.device_blocks = 4;
  cache.host_blocks = 8;
  controller_options o = opts();
  o.storage = true;
  controller_core core(cache, o);
  std::vector<transfer> out;
  std::vector<request_id> landed;
  auto settle = [&] {  // completes every transfer, follow-ups included
    while (!out.empty()) {
      std::vector<transfer> now = std::move(out);
      out.clear();
      for (const transfer& t : now)
        core.on_transfer_done(done(t), out, landed);
    }
  };
  grant g;
  step_inputs in;
  core.on_arrival(1, blocks_of({1, 2}));
  core.on_commit(commit{1, {}, {}, {}, {}, {{1, 32}}}, g, out, in);
  core.on_commit(commit{2, {{1, 32}}, {1}, {}, {}, {}}, g = {}, out, in = {});
  settle();
  // Request 2 shares blocks 1, 2 (on the device); storage holds its next two.
  std::vector<cache_block> blocks = blocks_of({1, 2, 5, 6});
  CHECK(core.on_arrival(2, blocks).size() == 2);
  REQUIRE(core.on_exists(2, 2, out));
  node_id prefix = core.model().tree().find(blocks[1].hash);
  CHECK(core.model().tree().node(prefix).ref_count == 1);  // the load hangs below it
  settle();
  CHECK(landed == std::vector<request_id>{2});
  CHECK(core.prefetched(2) == 2);
  // Landed, nothing holds the prefix or the loaded blocks: waiting requests pin no blocks.
  CHECK(core.model().tree().node(prefix).ref_count == 0);
  CHECK(core.model().tree().node(core.model().tree().find(blocks[3].hash)).ref_count == 0);
  core.on_commit(commit{3, {}, {}, {}, {}, {{2, 64}}}, g = {}, out, in = {});
  REQUIRE(g.admits.at(0).admitted);
  CHECK(g.admits[0].device_blocks == 2);
  CHECK(g.admits[0].storage_blocks == 2);  // the prefetched blocks, swapped in from host
  CHECK(g.admits[0].host_blocks == 0);
  settle();
  core.on_commit(commit{4, {{2, 64}}, {2}, {}, {}, {}}, g = {}, out, in = {});
  settle();
  core.check(true);
  CHECK(core.report().invariant_violations == 0);
  CHECK(core.idle());
}

namespace {

// Records the batches as the controller ends them.
struct batch_recorder final : block_event_sink {
  std::vector<std::vector<block_event>> batches;
  block_event_log open;
  void stored(tier t, block_hash h, std::optional<block_hash> p, uint32_t n) override {
    open.stored(t, h, p, n);
  }
  void removed(tier t, block_hash h) override { open.removed(t, h); }
  void cleared() override { open.cleared(); }
  void batch_end() override {
    batches.push_back(open.take());
  }
};

}  // namespace

TEST_CASE("controller: block events come one batch per message, in the order of the changes",
          "[actors][controller][events]") {
  cache_options cache;
  cache.device_blocks = 2;
  cache.host_blocks = 4;
  cache.policy = write_policy::write_back;
  batch_recorder rec;
  controller_options o = opts();
  o.events = &rec;
  controller_core core(cache, o);
  std::vector<transfer> out;
  std::vector<request_id> landed;
  grant g;
  step_inputs in;
  core.on_arrival(1, blocks_of({1, 2}));
  core.on_commit(commit{1, {}, {}, {}, {}, {{1, 32}}}, g, out, in);
  core.on_commit(commit{2, {{1, 32}}, {1}, {}, {}, {}}, g = {}, out, in = {});
  auto a = blocks_of({1, 2});
  // Committing A's blocks stores both on the device, parent first, in that step's batch.
  REQUIRE(rec.batches.size() == 3);  // arrival, admission, commit: one batch each
  const auto& stores = rec.batches[2];
  REQUIRE(stores.size() == 2);
  CHECK(stores[0].kind == block_event_kind::stored);
  CHECK(stores[0].where == tier::device);
  CHECK(stores[0].hash == a[0].hash);
  CHECK(stores[1].parent == std::optional<block_hash>(a[0].hash));
  // B evicts A under write_back: A leaves the device at once and reaches the host only when the
  // D2H lands, in the batch of that finished transfer.
  core.on_arrival(2, blocks_of({3, 4}));
  core.on_commit(commit{3, {}, {}, {}, {}, {{2, 32}}}, g = {}, out, in = {});
  const auto& evictions = rec.batches.back();
  REQUIRE(evictions.size() == 2);
  for (const block_event& e : evictions) {
    CHECK(e.kind == block_event_kind::removed);
    CHECK(e.where == tier::device);
  }
  REQUIRE(out.size() == 1);
  size_t before = rec.batches.size();
  core.on_transfer_done(done(out[0]), out, landed);
  REQUIRE(rec.batches.size() == before + 1);
  size_t host_stores = 0;
  for (const block_event& e : rec.batches.back())
    host_stores += e.kind == block_event_kind::stored && e.where == tier::host;
  CHECK(host_stores == 2);
}

TEST_CASE("controller: a re-admission's hits count toward no write-through threshold",
          "[actors][controller][write_policy]") {
  cache_options cache;
  cache.device_blocks = 4;
  cache.host_blocks = 4;
  cache.policy = write_policy::write_through_selective;
  cache.write_through_threshold = 2;
  controller_core core(cache, opts());
  std::vector<transfer> out;
  grant g;
  step_inputs in;
  core.on_arrival(1, blocks_of({1, 2}));
  core.on_commit(commit{1, {}, {}, {}, {}, {{1, 32}}}, g, out, in);
  // It computes its prompt and is preempted (recompute): its blocks stay cached, unreferenced.
  core.on_commit(commit{2, {{1, 32}}, {}, {{1, 32}}, {}, {}}, g = {}, out, in = {});
  core.on_commit(commit{3, {}, {}, {}, {}, {{1, 32}}}, g = {}, out, in = {});
  REQUIRE(g.admits.at(0).device_blocks == 2);  // it finds its own blocks
  node_id first = core.model().tree().find(blocks_of({1})[0].hash);
  CHECK(core.model().tree().node(first).hit_count == 1);
  CHECK(out.empty());  // no backup: nobody else reused them
  core.on_commit(commit{4, {{1, 32}}, {1}, {}, {}, {}}, g = {}, out, in = {});
  // Another request's match is reuse.
  core.on_arrival(2, blocks_of({1, 2}));
  core.on_commit(commit{5, {}, {}, {}, {}, {{2, 32}}}, g = {}, out, in = {});
  CHECK(core.model().tree().node(first).hit_count == 2);
  CHECK(core.model().counters().backups == 2);
}

TEST_CASE("controller: requests admitted in one step do not match each other's blocks",
          "[actors][controller]") {
  // Only computed blocks join the tree (FastDeploy inserts them at allocation and relies on
  // scheduling order; docs/fastdeploy.md §2).
  cache_options cache;
  cache.device_blocks = 8;
  controller_core core(cache, opts());
  std::vector<transfer> out;
  grant g;
  step_inputs in;
  core.on_arrival(1, blocks_of({1, 2}));
  core.on_arrival(2, blocks_of({1, 2}));
  core.on_commit(commit{1, {}, {}, {}, {}, {{1, 32}, {2, 32}}}, g, out, in);
  REQUIRE(g.admits.size() == 2);
  CHECK(g.admits[1].admitted);
  CHECK(g.admits[1].device_blocks == 0);
  CHECK(in.written.size() == 4);  // both compute both blocks
}

TEST_CASE("controller: with prefix caching off nothing matches and storage is not asked",
          "[actors][controller]") {
  cache_options cache;
  cache.device_blocks = 8;
  cache.host_blocks = 8;
  cache.storage_tier = true;
  cache.storage = storage_write::always;
  cache.caching = prefix_caching::off;
  controller_options o = opts();
  o.storage = true;
  controller_core core(cache, o);
  std::vector<transfer> out;
  grant g;
  step_inputs in;
  CHECK(core.on_arrival(1, blocks_of({1, 2})).empty());
  core.on_commit(commit{1, {}, {}, {}, {}, {{1, 32}}}, g, out, in);
  core.on_commit(commit{2, {{1, 32}}, {1}, {}, {}, {}}, g = {}, out, in = {});
  CHECK(core.on_arrival(2, blocks_of({1, 2})).empty());
  core.on_commit(commit{3, {}, {}, {}, {}, {{2, 32}}}, g = {}, out, in = {});
  CHECK(g.admits.at(0).device_blocks == 0);
  CHECK(out.empty());  // no backup, no store
}
