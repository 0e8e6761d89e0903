// A whole instance under storage faults at exact virtual times: a prefix that storage alone holds
// is loaded when storage answers, and recomputed, with nothing leaked, when its get fails or its
// node is lost.

#include <catch2/catch.hpp>

#include "tests/sim/scenario.hpp"

using namespace kvtier;
using namespace kvtier::test;

namespace {

// A device of 4 blocks, a host of 6, storage of 64: request 3 repeats request 0's prompt after two
// others have pushed it out of device and host memory, so only storage holds it.
deployment_plan storage_config() {
  deployment_plan c = small_config(4, 6);
  instance_of(c).cache.storage = storage_write::always;
  instance_of(c).cache.storage_tier = true;
  instance_of(c).controller.storage = true;
  c.storage.pool.capacity_blocks = 64;
  c.storage.pool.op_latency_ns = 100;
  return c;
}

std::vector<trace_request> requests() {
  return {request(0, 0, {1, 2, 3}, 1), request(1, 1'000'000, {4, 5, 6}, 1),
          request(2, 2'000'000, {7, 8, 9}, 1), request(3, 3'000'000, {1, 2, 3}, 1)};
}

// require_clean, and the storage pool left with nothing leased, in flight or broken.
void require_clean_storage(const full_result& r) {
  require_clean(r);
  REQUIRE(r.storage.invariant_violations == 0);
  REQUIRE(r.storage.open_leases == 0);
  REQUIRE(r.storage.leased_keys == 0);
  REQUIRE(r.storage.writes_in_flight == 0);
  REQUIRE(r.storage.pending == 0);
}

}  // namespace

TEST_CASE("fault scenario: a failed get recomputes the prefix storage held",
          "[actors][storage][faults]") {
  full_result ok = run_scenario(storage_config(), requests());
  require_clean_storage(ok);
  const request_record& hit = record(ok, 3);
  // Two blocks are loaded from storage and count as hits; the third holds the prompt's last
  // token, which a full hit recomputes (docs/design.md, "Hit ratio"): it is neither looked up
  // nor loaded, so hits and computed tokens add up to the prompt.
  CHECK(ok.controller.loads == 2);
  REQUIRE(hit.hit_blocks[2] == 2);
  CHECK(hit.computed_tokens == 16);
  CHECK(ok.controller.failed_loads == 0);

  deployment_plan c = storage_config();
  c.storage.pool.faults.get_fail_probability = 1;
  full_result failed = run_scenario(c, requests());
  require_clean_storage(failed);
  const request_record& miss = record(failed, 3);
  CHECK(miss.hit_blocks[2] == 0);
  CHECK(miss.computed_tokens == 48);  // every token again
  CHECK(failed.controller.failed_loads == 1);
  // One failed get of the two keys the prefetch reads (get_failures counts keys storage
  // held). No second lookup at admission: the tiers lost nothing they had cached when the
  // request became ready, the failed load cached nothing.
  CHECK(failed.storage.get_failures == 2);
  CHECK(failed.controller.prefetch.admission_lookups == 0);
}

TEST_CASE("fault scenario: a node lost before the read takes the prefix with it",
          "[actors][storage][faults]") {
  deployment_plan c = storage_config();
  c.storage.pool.faults.node_loss_at_ns = 2'500'000;  // after the writes, before request 3 arrives
  c.storage.pool.faults.down_ns = 100'000'000;
  full_result r = run_scenario(c, requests());
  require_clean_storage(r);
  CHECK(r.storage.node_losses == 1);
  CHECK(r.storage.keys_lost > 0);
  const request_record& again = record(r, 3);
  CHECK(again.hit_blocks[2] == 0);
  CHECK(again.computed_tokens == 48);
  // Its blocks cannot be written back while the node is down: refused, and counted.
  CHECK(r.storage.puts_node_down > 0);
}

TEST_CASE("fault scenario: failed puts leave nothing for a later request to read",
          "[actors][storage][faults]") {
  deployment_plan c = storage_config();
  c.storage.pool.faults.put_fail_probability = 1;
  full_result r = run_scenario(c, requests());
  require_clean_storage(r);
  CHECK(r.storage.stored == 0);
  CHECK(r.storage.put_failures > 0);
  CHECK(record(r, 3).hit_blocks[2] == 0);
  CHECK(r.controller.failed_loads == 0);  // nothing was promised: no load was even tried
}
