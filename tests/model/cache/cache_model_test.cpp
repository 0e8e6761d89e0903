#include "model/cache/cache_model.hpp"

#include <catch2/catch.hpp>

#include "model/cache/invariants.hpp"
#include "tests/model/cache/cache_harness.hpp"

#include <map>
#include <set>

using namespace kvtier;
using namespace kvtier::test;

TEST_CASE("cache_model: device only: prefix hits and leaf-first LRU eviction", "[model]") {
  harness h(device_only(4));
  CHECK(h.serve({1, 2, 3}).device == 0);
  // Shares [1, 2]; one new block fits in the last free slot.
  CHECK(h.serve({1, 2, 4}).device == 2);
  CHECK(h.m.counters().device_evictions == 0);
  // Two new blocks: only leaves go, oldest first: 3, then 4. Their parent 2 became a leaf, but
  // two evictions were enough.
  CHECK(h.serve({5, 6}).device == 0);
  CHECK(h.m.counters().device_evictions == 2);
  CHECK_FALSE(h.cached({1, 2, 3}));
  CHECK_FALSE(h.cached({1, 2, 4}));
  CHECK(h.cached({1, 2}));
  CHECK(h.serve({1, 2, 3}).device == 2);
  h.check(true);
}

TEST_CASE("cache_model: allocation fails whole when held blocks fill the device", "[model]") {
  harness h(device_only(3));
  auto blocks = blocks_of({1, 2, 3});
  std::vector<block_id> fresh;
  REQUIRE(h.m.allocate_device(3, fresh, h.orders));
  std::vector<block_id> more;
  CHECK_FALSE(h.m.allocate_device(1, more, h.orders));
  CHECK(more.empty());
  CHECK(h.m.device_available() == 0);
  for (block_id b : fresh)
    h.m.free_device(b);
  CHECK(h.m.device_available() == 3);
  h.check(true);
}

TEST_CASE("cache_model: write_through backs up committed blocks and eviction flips them to host",
          "[model][write_policy]") {
  harness h(tiers(2, 4, write_policy::write_through, 5));  // write_through forces threshold 1
  h.serve({1, 2});
  CHECK(h.count(transfer_kind::backup) == 2);
  CHECK(h.m.pool(tier::host).used_count() == 2);
  h.serve({3, 4});  // evicts 1 and 2 from device: metadata only, no copy
  CHECK(h.count(transfer_kind::write_back) == 0);
  CHECK(h.m.counters().device_evictions == 2);
  auto pm = h.match({1, 2});
  CHECK(pm.device == 0);
  CHECK(pm.host == 2);
  pm = h.serve({1, 2});
  CHECK(pm.host == 2);
  CHECK(h.count(transfer_kind::swap_in) == 2);
  // The host copies stay after the swap-in (inclusive tiers).
  node_id n1 = h.m.tree().find(blocks_of({1})[0].hash);
  CHECK(h.m.tree().node(n1).ready(tier::device));
  CHECK(h.m.tree().node(n1).ready(tier::host));
  h.check(true);
}

TEST_CASE("cache_model: write_through_selective backs up once a block reaches the threshold",
          "[model][write_policy]") {
  harness h(tiers(8, 8, write_policy::write_through_selective, 2));
  h.serve({1, 2});
  CHECK(h.count(transfer_kind::backup) == 0);  // one use: hit_count 1
  h.serve({1, 3});
  CHECK(h.count(transfer_kind::backup) == 1);  // block 1 was reused: hit_count 2
  h.serve({1, 2});
  CHECK(h.count(transfer_kind::backup) == 2);  // now block 2 (its parent is backed up)
  harness t3(tiers(8, 8, write_policy::write_through_selective, 3));
  t3.serve({1});
  t3.serve({1});
  CHECK(t3.count(transfer_kind::backup) == 0);
  t3.serve({1});
  CHECK(t3.count(transfer_kind::backup) == 1);
  h.check(true);
  t3.check(true);
}

TEST_CASE("cache_model: selective eviction drops cold blocks and keeps backed-up ones",
          "[model][write_policy]") {
  harness h(tiers(2, 8, write_policy::write_through_selective, 2));
  h.serve({1});
  h.serve({1});  // block 1 backed up
  h.serve({2});  // cold
  h.serve({3, 4});  // evicts 2 (dropped) and 1 (flips to host)
  CHECK(h.m.counters().device_evictions == 2);
  CHECK(h.match({1}).host == 1);
  CHECK(h.match({2}).host == 0);
  CHECK(h.m.counters().dropped == 1);
  h.check(true);
}

TEST_CASE("cache_model: write_back copies at eviction and the freed block waits for the D2H",
          "[model][write_policy]") {
  harness h(tiers(2, 4, write_policy::write_back));
  h.serve({1, 2});
  CHECK(h.count(transfer_kind::backup) == 0);
  // A new request needs both device blocks: 2 then 1 are written back.
  std::vector<block_id> fresh;
  REQUIRE(h.m.allocate_device(2, fresh, h.orders));
  REQUIRE(h.orders.size() == 2);
  CHECK(h.orders[0].kind == transfer_kind::write_back);
  // The FastDeploy hazard: the blocks handed out are still read by the D2H. They are not free,
  // and their pins tell the new owner to wait.
  for (block_id b : fresh)
    CHECK(h.m.pool(tier::device).pins(b) == 1);
  CHECK(h.match({1}).host == 0);  // host copies are still being filled
  h.check(false);
  h.drain();
  for (block_id b : fresh) {
    CHECK(h.m.pool(tier::device).pins(b) == 0);
    h.m.free_device(b);
  }
  CHECK(h.match({1, 2}).host == 2);
  // A swap-in frees the host copy under write_back (exclusive tiers).
  h.serve({1, 2});
  CHECK(h.m.pool(tier::host).used_count() == 0);
  h.check(true);
}

TEST_CASE("cache_model: write_back with no host room drops the block", "[model][write_policy]") {
  harness h(tiers(1, 1, write_policy::write_back));
  h.serve({1});
  h.serve({2});  // 1 written back into the only host block
  CHECK(h.count(transfer_kind::write_back) == 1);
  h.serve({3});  // 2 written back; host evicts 1 to make room
  CHECK(h.count(transfer_kind::write_back) == 2);
  CHECK(h.m.counters().host_evictions == 1);
  CHECK(h.match({1}).host == 0);
  CHECK(h.match({2}).host == 1);
  h.check(true);
}

TEST_CASE("cache_model: storage writes follow host copies", "[model][storage]") {
  cache_options o = tiers(2, 2, write_policy::write_through);
  o.storage_tier = true;
  o.storage = storage_write::always;
  harness always(o);
  always.serve({1, 2});
  CHECK(always.count(transfer_kind::store) == 2);  // after each backup completed

  o.storage = storage_write::on_host_evict;
  harness on_evict(o);
  on_evict.serve({1, 2});
  CHECK(on_evict.count(transfer_kind::store) == 0);
  on_evict.serve({3, 4});  // 1, 2 flip to host; backing up 3, 4 evicts them from host
  CHECK(on_evict.count(transfer_kind::store) == 2);

  o.storage = storage_write::never;
  harness never(o);
  never.serve({1, 2});
  never.serve({3, 4});
  CHECK(never.count(transfer_kind::store) == 0);
  always.check(true);
  on_evict.check(true);
  never.check(true);
}

TEST_CASE("cache_model: storage write_through_selective stores a block at its threshold hit",
          "[model][storage]") {
  cache_options o = tiers(8, 8, write_policy::write_through);
  o.storage_tier = true;
  o.storage = storage_write::write_through_selective;
  o.storage_write_threshold = 2;
  harness h(o);
  h.serve({1, 2});  // backed up to host at once (write_through), one hit each: not stored
  CHECK(h.count(transfer_kind::backup) == 2);
  CHECK(h.count(transfer_kind::store) == 0);
  h.serve({1, 3});  // block 1 reaches 2 hits with its host copy ready: stored now
  CHECK(h.count(transfer_kind::store) == 1);
  h.serve({1, 2});  // block 2 reaches 2 hits; block 1 (3 hits) is not stored again
  CHECK(h.count(transfer_kind::store) == 2);
  h.check(true);

  // A block that has its hits before the host policy backs it up is stored when the request
  // giving it the threshold hit finishes, through a staged host copy.
  cache_options s = tiers(8, 8, write_policy::write_through_selective, 3);
  s.storage_tier = true;
  s.storage = storage_write::write_through_selective;
  s.storage_write_threshold = 2;
  harness late(s);
  late.serve({1});
  late.serve({1});
  CHECK(late.count(transfer_kind::store) == 1);  // 2 hits, staged: no host copy kept
  CHECK(late.count(transfer_kind::backup) == 1);
  CHECK(late.m.pool(tier::host).used_count() == 0);
  late.serve({1});                                // 3 hits: backed up, not stored again
  CHECK(late.count(transfer_kind::backup) == 2);
  CHECK(late.count(transfer_kind::store) == 1);
  late.check(true);
}

TEST_CASE("cache_model: a storage load is matchable only once its host copy is ready",
          "[model][storage]") {
  cache_options o = tiers(4, 4, write_policy::write_through);
  o.storage_tier = true;
  harness h(o);
  auto blocks = blocks_of({1, 2});
  auto n1 = h.m.begin_load(root_node, blocks[0], h.orders);
  REQUIRE(n1);
  CHECK(h.m.tree().node(*n1).state(tier::host) == copy_state::filling);  // LOADING_FROM_STORAGE
  CHECK(h.match({1}).host == 0);
  CHECK_FALSE(h.m.begin_load(root_node, blocks[0], h.orders));  // already has a node
  h.drain();
  CHECK(h.match({1}).host == 1);
  h.m.release(&*n1, 1);
  h.check(true);
}

TEST_CASE("cache_model: a dropped block takes its host-only children along", "[model]") {
  cache_options o = tiers(2, 4, write_policy::write_through_selective, 2);
  o.storage_tier = true;
  harness h(o);
  h.serve({1});  // cold device block, no host copy
  auto blocks = blocks_of({1, 2});
  node_id n1 = h.m.tree().find(blocks[0].hash);
  auto n2 = h.m.begin_load(n1, blocks[1], h.orders);  // a storage hit below it, host only
  REQUIRE(n2);
  h.drain();
  h.m.release(&*n2, 1);
  h.check(true);
  h.serve({7, 8});  // needs both device blocks: 1 is a device leaf without a host copy
  CHECK(h.m.counters().dropped == 2);
  CHECK(h.m.tree().find(blocks[1].hash) == root_node);
  h.check(true);
}

namespace {

// The index as the event stream tells it: per tier, the blocks with a ready copy.
struct followed_index {
  std::set<block_hash> ready[node_tier_count];
  std::map<block_hash, std::optional<block_hash>> parent;
  uint32_t cleared = 0;

  void apply(const std::vector<block_event>& events) {
    for (const block_event& e : events) {
      auto& s = ready[static_cast<int>(e.where)];
      switch (e.kind) {
        case block_event_kind::stored:
          REQUIRE(s.insert(e.hash).second);  // never stored twice without a removal between
          parent[e.hash] = e.parent;
          break;
        case block_event_kind::removed:
          REQUIRE(s.erase(e.hash) == 1);     // never removed unless stored
          break;
        case block_event_kind::cleared:
          ready[0].clear();
          ready[1].clear();
          ++cleared;
          break;
      }
    }
  }

  void require_matches(const cache_model& m) const {
    std::set<block_hash> truth[node_tier_count];
    for (node_id id : m.tree().live_nodes()) {
      if (id == root_node)
        continue;
      const tree_node& n = m.tree().node(id);
      for (int t = 0; t < node_tier_count; ++t)
        if (n.ready(static_cast<tier>(t)))
          truth[t].insert(n.hash);
      if (n.ready(tier::device) || n.ready(tier::host)) {
        std::optional<block_hash> p;
        if (n.parent != root_node)
          p = m.tree().node(n.parent).hash;
        REQUIRE(parent.at(n.hash) == p);
      }
    }
    REQUIRE(truth[0] == ready[0]);
    REQUIRE(truth[1] == ready[1]);
  }
};

}  // namespace

TEST_CASE("cache_model: block events follow every ready copy in each tier", "[model][events]") {
  for (write_policy p : {write_policy::write_through, write_policy::write_through_selective,
                         write_policy::write_back}) {
    CAPTURE(to_string(p));
    cache_options o = tiers(3, 5, p);
    o.storage = storage_write::never;
    harness h(o);
    block_event_log log;
    h.m.set_event_sink(&log);
    followed_index seen;
    const std::vector<std::vector<uint64_t>> requests = {
        {1, 2, 3}, {1, 2, 4}, {5, 6}, {1, 2, 3}, {7}, {5, 6, 8}, {1, 9}, {1, 2, 3}, {10, 11, 12}};
    for (const auto& r : requests) {
      h.serve(r);
      seen.apply(log.take());
      seen.require_matches(h.m);
    }
    CHECK(h.m.counters().device_evictions > 0);
    h.m.reset();
    seen.apply(log.take());
    CHECK(seen.cleared == 1);
    seen.require_matches(h.m);
  }
}

TEST_CASE("cache_model: a stored event names its parent and its tokens", "[model][events]") {
  harness h(tiers(4, 4, write_policy::write_through));
  block_event_log log;
  h.m.set_event_sink(&log);
  h.serve({1, 2});
  auto blocks = blocks_of({1, 2});
  std::vector<block_event> device_stores;
  for (const block_event& e : log.events())
    if (e.kind == block_event_kind::stored && e.where == tier::device)
      device_stores.push_back(e);
  REQUIRE(device_stores.size() == 2);
  CHECK(device_stores[0].hash == blocks[0].hash);
  CHECK_FALSE(device_stores[0].parent.has_value());
  CHECK(device_stores[1].parent == std::optional<block_hash>(blocks[0].hash));
  CHECK(device_stores[1].tokens == bs);
  h.m.set_event_sink(nullptr);
  log.take();
  h.serve({3});
  CHECK(log.empty());  // unset: nobody hears anything
}

TEST_CASE("cache_model: a block with no device room passes through to host as the policy says",
          "[model][write_policy]") {
  auto blocks = blocks_of({1, 2});
  std::vector<transfer_order> orders;
  SECTION("write_through and write_back give it a host copy, held, under its parent") {
    for (write_policy p : {write_policy::write_through, write_policy::write_back}) {
      cache_model m(tiers(1, 2, p));
      auto first = m.pass_through_device(root_node, blocks[0], orders);
      REQUIRE(first);
      auto second = m.pass_through_device(*first, blocks[1], orders);
      REQUIRE(second);
      CHECK(orders.empty());  // ready at once, no storage tier
      const tree_node& x = m.tree().node(*second);
      CHECK(x.parent == *first);
      CHECK(x.ready(tier::host));
      CHECK_FALSE(x.has(tier::device));
      CHECK(x.ref_count == 1);
      CHECK(m.counters().backups + m.counters().write_backs == 2);
      CHECK_FALSE(m.pass_through_device(root_node, blocks[0], orders));  // already a node
    }
  }
  SECTION("write_through_selective above one hit keeps no copy, as device eviction would not") {
    cache_model m(tiers(1, 2, write_policy::write_through_selective, 2));
    CHECK_FALSE(m.pass_through_device(root_node, blocks[0], orders));
    CHECK(m.tree().size() == 0);
  }
}

TEST_CASE("cache_model: a staged host copy that a swap-in reads stays until the swap-in lands",
          "[model][storage][write_policy]") {
  // write_back stages a finished block for storage through a host copy. The device copy is then
  // evicted (the host copy is its last), and a new request swaps it in while the store still
  // reads it. The store's end must not free that host copy: the swap-in reads it and, under
  // write_back, frees it itself when it lands (docs/design.md, "Write policies").
  cache_options o = tiers(1, 2, write_policy::write_back);
  o.storage_tier = true;
  o.storage = storage_write::always;
  harness h(o);
  auto blocks = blocks_of({1});
  std::vector<block_id> fresh;
  REQUIRE(h.m.allocate_device(1, fresh, h.orders));
  node_id a = h.m.commit(root_node, blocks[0], fresh[0], h.orders).node;
  h.m.store_finished(&a, 1, h.orders);
  REQUIRE(h.orders.size() == 1);  // the staging backup
  transfer_order backup = h.orders.front();
  h.orders.clear();
  h.m.complete(backup, h.orders);
  REQUIRE(h.orders.size() == 1);
  transfer_order store = h.orders.front();  // still reading the host copy
  REQUIRE(store.kind == transfer_kind::store);
  h.orders.clear();
  h.m.release(&a, 1);

  fresh.clear();
  REQUIRE(h.m.allocate_device(1, fresh, h.orders));  // evicts a: its host copy stays
  h.m.free_device(fresh[0]);
  prefix_match pm = h.match({1});
  REQUIRE(pm.host == 1);
  h.m.acquire_matched(pm.nodes.data(), pm.nodes.size());
  fresh.clear();
  REQUIRE(h.m.allocate_device(1, fresh, h.orders));
  h.m.swap_in(a, fresh[0], h.orders);
  REQUIRE(h.orders.size() == 1);
  transfer_order swap = h.orders.front();
  h.orders.clear();

  h.m.complete(store, h.orders);
  CHECK(h.m.tree().node(a).ready(tier::host));  // the swap-in's source
  h.check(false);
  h.m.complete(swap, h.orders);
  CHECK(h.m.tree().node(a).ready(tier::device));
  CHECK_FALSE(h.m.tree().node(a).has(tier::host));  // write_back: freed on swap-in
  CHECK(h.m.pool(tier::host).used_count() == 0);
  h.m.release(&a, 1);
  h.check(true);
}

// A host tier smaller than the device, write_through, stores on host eviction: once the host
// holds only copies of idle device blocks, a backup takes the copy of the least recently used of
// them (stored, as any host eviction is) and the device keeps that block. A first rule moved the
// block off the device, which shrank the whole cache to the host's size; before that, the backup
// was skipped, the block dropped uncopied at its device eviction and never stored, and a larger
// device, pinning more of the host tier, stored less (docs/design.md, "Write policies").
TEST_CASE("cache_model: a backup into a host tier full of copies gives up the oldest copy",
          "[model][write_policy][storage]") {
  cache_options o = tiers(4, 2, write_policy::write_through);
  o.storage_tier = true;
  o.storage = storage_write::on_host_evict;
  harness h(o);
  h.serve({1});
  h.serve({2});
  CHECK(h.m.pool(tier::host).used_count() == 2);
  h.serve({3});  // the host tier holds copies of 1 and 2, both still on the device
  CHECK(h.m.counters().backups_skipped == 0);
  CHECK(h.count(transfer_kind::backup) == 3);
  CHECK(h.count(transfer_kind::store) == 1);  // 1's copy, given up
  CHECK(h.match({1}).device == 1);             // the device kept it
  CHECK(h.m.counters().host_copies_evicted == 1);
  CHECK(h.match({2}).device == 1);
  CHECK(h.match({3}).device == 1);
  h.check(true);
}
