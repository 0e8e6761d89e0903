// Device copies the engine that owns the device tier dropped (docs/protocol.md, version 3).

#include "model/cache/cache_model.hpp"

#include <catch2/catch.hpp>

#include "tests/model/cache/cache_harness.hpp"

using namespace kvtier;
using namespace kvtier::test;

TEST_CASE("cache_model: a dropped device copy leaves with its descendants, host copies stay",
          "[model]") {
  harness h(tiers(4, 8, write_policy::write_through));
  h.serve({1, 2, 3});
  REQUIRE(h.match({1, 2, 3}).device == 3);
  CHECK(h.m.drop_device_copy(blocks_of({1, 2})[1].hash, h.orders) == 2);
  CHECK(h.orders.empty());  // nothing is read from a block the engine reused
  prefix_match pm = h.match({1, 2, 3});
  CHECK(pm.device == 1);
  CHECK(pm.host == 2);
  CHECK(h.m.counters().engine_drops == 2);
  CHECK(h.m.drop_device_copy(blocks_of({1, 2})[1].hash, h.orders) == 0);  // already gone
  CHECK(h.m.drop_device_copy(999, h.orders) == 0);                       // never known
  h.check(true);
}

TEST_CASE("cache_model: a dropped device copy is never written back", "[model]") {
  harness h(tiers(4, 8, write_policy::write_back));
  h.serve({1, 2});
  CHECK(h.m.drop_device_copy(blocks_of({1})[0].hash, h.orders) == 2);
  CHECK(h.orders.empty());
  CHECK_FALSE(h.cached({1}));  // no host copy: the blocks left every tier
  h.serve({5, 6, 7, 8});       // the whole device: nothing left to evict or write back
  CHECK(h.count(transfer_kind::write_back) == 0);
  h.check(true);
}

TEST_CASE("cache_model: a block a request holds is not dropped", "[model]") {
  harness h(tiers(4, 8, write_policy::write_through));
  h.serve({1, 2});
  prefix_match pm = h.match({1, 2});
  h.m.hold(pm.nodes.data(), pm.nodes.size());
  CHECK(h.m.drop_device_copy(blocks_of({1})[0].hash, h.orders) == 0);
  CHECK(h.match({1, 2}).device == 2);
  h.m.release_from_tail(pm.nodes);
  h.check(true);
}
