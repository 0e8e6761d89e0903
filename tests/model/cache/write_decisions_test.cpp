// The write decisions where kvtier and FastDeploy could differ (docs/fastdeploy.md §2): when
// storage is written, when a backup starts, what a short host tier does to a batch of copies,
// and prefix caching switched off.

#include "model/cache/cache_model.hpp"

#include <catch2/catch.hpp>

#include "tests/model/cache/cache_harness.hpp"

using namespace kvtier;
using namespace kvtier::test;

namespace {

cache_options with_storage(cache_options o, storage_write s, uint32_t storage_threshold = 2) {
  o.storage_tier = true;
  o.storage = s;
  o.storage_write_threshold = storage_threshold;
  return o;
}

node_id node_of(const harness& h, const std::vector<uint64_t>& ids) {
  return h.m.tree().find(blocks_of(ids).back().hash);
}

}  // namespace

TEST_CASE("write decisions: storage is written at finish whatever the host policy",
          "[model][storage][write_policy]") {
  // Selective host policy: a block computed once gets no host copy, yet storage_write=always
  // stores it when its request finishes, staged through a host block freed afterwards.
  harness h(with_storage(tiers(8, 8, write_policy::write_through_selective, 2),
                         storage_write::always));
  h.serve({1, 2});
  CHECK(h.count(transfer_kind::store) == 2);
  CHECK(h.m.counters().staged_stores == 2);
  CHECK(h.m.pool(tier::host).used_count() == 0);  // the staged copies went after the stores
  CHECK_FALSE(h.m.tree().node(node_of(h, {1})).has(tier::host));
  h.serve({1, 2});  // reused: block 1 reaches the host threshold and is backed up, not re-stored
  CHECK(h.count(transfer_kind::store) == 2);
  CHECK(h.m.tree().node(node_of(h, {1})).ready(tier::host));
  h.check(true);

  // Selective storage writes: stored at the finish of the request that gives the threshold hit.
  harness s(with_storage(tiers(8, 8, write_policy::write_through_selective, 3),
                         storage_write::write_through_selective, 2));
  s.serve({1});
  CHECK(s.count(transfer_kind::store) == 0);
  s.serve({1});
  CHECK(s.count(transfer_kind::store) == 1);
  CHECK(s.m.pool(tier::host).used_count() == 0);
  s.serve({1});  // host threshold: backed up now; stored before, so not again
  CHECK(s.count(transfer_kind::store) == 1);
  CHECK(s.count(transfer_kind::backup) == 2);  // the staging copy, then the backup
  s.check(true);
}

TEST_CASE("write decisions: a finish stages as much of its path as the host tier holds",
          "[model][storage][write_policy]") {
  harness h(with_storage(tiers(8, 1, write_policy::write_through_selective, 3),
                         storage_write::always));
  h.serve({1, 2});  // one host block: block 1 is staged in it, block 2 finds no room
  CHECK(h.count(transfer_kind::store) == 1);
  CHECK(h.m.counters().finish_stores_skipped == 1);
  CHECK(h.m.pool(tier::host).used_count() == 0);
  h.serve({1, 2});  // the next finish stores block 2, not block 1 again
  CHECK(h.count(transfer_kind::store) == 2);
  h.check(true);
}

TEST_CASE("write decisions: write_through backs up a block its request still holds",
          "[model][write_policy]") {
  // FastDeploy backs a block up one step after it becomes unreferenced; kvtier as soon as it is
  // committed, so the D2H overlaps the request's decode (docs/fastdeploy.md §2).
  harness h(tiers(4, 4, write_policy::write_through));
  auto blocks = blocks_of({1});
  std::vector<block_id> fresh;
  REQUIRE(h.m.allocate_device(1, fresh, h.orders));
  commit_result c = h.m.commit(root_node, blocks[0], fresh[0], h.orders);
  h.m.collect_backups(h.orders);
  REQUIRE(h.orders.size() == 1);
  CHECK(h.orders[0].kind == transfer_kind::backup);
  CHECK(h.m.tree().node(c.node).ref_count == 1);
  h.drain();
  h.m.release(&c.node, 1);
  h.check(true);
}

TEST_CASE("write decisions: a short host tier backs up the leading part of a chain",
          "[model][write_policy]") {
  // FastDeploy skips the whole batch when the host tier cannot take all of it; kvtier backs up
  // what fits, parents first, so the prefix it keeps still hits (docs/fastdeploy.md §2).
  harness h(tiers(4, 2, write_policy::write_through));
  h.serve({1, 2, 3});
  CHECK(h.count(transfer_kind::backup) == 2);
  CHECK(h.m.tree().node(node_of(h, {1})).ready(tier::host));
  CHECK(h.m.tree().node(node_of(h, {1, 2})).ready(tier::host));
  CHECK_FALSE(h.m.tree().node(node_of(h, {1, 2, 3})).has(tier::host));
  h.check(true);
}

TEST_CASE("write decisions: a storage load with one free host block loads the first block",
          "[model][storage]") {
  // FastDeploy loads none of a prefix it cannot load whole; kvtier loads its leading part.
  harness h(with_storage(tiers(4, 1, write_policy::write_through), storage_write::never));
  auto blocks = blocks_of({1, 2, 3});
  auto first = h.m.begin_load(root_node, blocks[0], h.orders);
  REQUIRE(first);
  CHECK_FALSE(h.m.begin_load(*first, blocks[1], h.orders));
  CHECK(h.orders.size() == 1);
  h.drain();
  h.m.release(&*first, 1);
  h.check(true);
}

TEST_CASE("write decisions: write_back makes no copy that a dropped parent throws away",
          "[model][write_policy]") {
  // Two victims, a chain 1 <- 2, one host block: the parent gets it and the leaf is dropped
  // uncopied. Written back leaf first, the parent found no room and its dropped subtree took
  // the leaf's copy in flight along.
  harness h(tiers(2, 1, write_policy::write_back));
  h.serve({1, 2});
  h.serve({3, 4});
  CHECK(h.count(transfer_kind::write_back) == 1);
  CHECK(h.m.counters().host_evictions == 0);
  CHECK(h.match({1}).host == 1);
  CHECK(h.match({1, 2}).host == 1);
  h.check(true);
}

TEST_CASE("write decisions: prefix caching off matches nothing and copies nothing down",
          "[model][write_policy]") {
  cache_options o = with_storage(tiers(8, 8, write_policy::write_through), storage_write::always);
  o.caching = prefix_caching::off;
  harness h(o);
  CHECK(h.serve({1, 2}).nodes.empty());
  prefix_match again = h.serve({1, 2});
  CHECK(again.nodes.empty());
  CHECK(again.device_tokens + again.host_tokens == 0);
  CHECK(h.done.empty());  // no backup, no store
  h.check(true);
}
