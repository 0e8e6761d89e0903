// The storage actor's pool semantics and faults at exact virtual times: a get racing a put,
// exists leases that end, a node lost and back, a slow window, failed gets and puts.

#include "actors/storage/storage.hpp"

#include "tests/actors/det_fixture.hpp"

using namespace kvtier;
using namespace kvtier::test;

namespace {

// 1000 ns per request, then 1 byte per ns per node.
storage_options options(const sim_clock& clock, uint64_t capacity, uint32_t nodes = 1) {
  storage_options o;
  o.capacity_blocks = capacity;
  o.nodes = nodes;
  o.read_gbps = 1;
  o.write_gbps = 1;
  o.op_latency_ns = 1000;
  o.clock = clock;
  return o;
}

uint64_t on_node(uint64_t node, uint64_t low) {
  return node << 32 | low;
}

struct pool_fixture : det_fixture {
  /// Lets virtual time pass to `t` with nothing else to do.
  void wait_until(int64_t t) {
    self->delayed_send(self, clock.until(sys.clock(), t), wake_atom_v, uint64_t{0});
    run();
    self->receive([](wake_atom, uint64_t) {});
    REQUIRE(now() == t);
  }
  uint32_t leading(const storage_actor& s, std::vector<uint64_t> keys) {
    return ask<exists_reply>(s, exists_query{std::move(keys)}).first.leading;
  }
  storage_report report(const storage_actor& s) { return ask<storage_report>(s, report_atom_v).first; }
};

}  // namespace

TEST_CASE_METHOD(pool_fixture, "storage pool: a get racing a put reads nothing until it ends",
                 "[actors][storage][pool]") {
  auto storage = spawn_storage(sys, options(clock, 10));
  // At 0: a put of block 1 (ends at 1000 + 100 = 1100), the same put again, a get and an exists.
  auto put = self->request(storage, caf::infinite, caf::put_atom_v, storage_io{{1}, 100});
  auto again = self->request(storage, caf::infinite, caf::put_atom_v, storage_io{{1}, 100});
  auto get = self->request(storage, caf::infinite, caf::get_atom_v, storage_io{{1}, 10});
  auto probe = self->request(storage, caf::infinite, exists_query{{1}});
  run();
  CHECK(now() == 1100);  // the put's end is the last event
  auto fail = [](const caf::error& e) { FAIL(caf::to_string(e)); };
  put.receive([](const storage_io_reply& r) { CHECK(r.done == 1); }, fail);
  again.receive([](const storage_io_reply& r) { CHECK(r.done == 0); }, fail);  // not written twice
  get.receive([](const storage_io_reply& r) { CHECK(r.done == 0); }, fail);    // no dirty read
  probe.receive([](const exists_reply& r) { CHECK(r.leading == 0); }, fail);
  // Once the put has ended the block is there: a get at 1100 reads it by 1100 + 1000 + 100.
  auto [got, at] = ask<storage_io_reply>(storage, caf::get_atom_v, storage_io{{1}, 100});
  CHECK(got.done == 1);
  CHECK(at == 2200);
  self->send(storage, storage_release{got.lease});
  storage_report r = report(storage);
  CHECK(r.put_in_flight == 1);
  CHECK(r.nodes[1].name == "storage0.write");
  CHECK(r.nodes[1].bytes == 100);  // one write, not two
  CHECK(r.invariant_violations == 0);
  CHECK(r.leased_keys == 0);
  // A put of a stored block is not written either: it answers after the request latency alone.
  auto [present, present_at] = ask<storage_io_reply>(storage, caf::put_atom_v, storage_io{{1}, 100});
  CHECK(present.done == 0);
  CHECK(present_at == 2200 + 1000);
  CHECK(report(storage).put_present == 1);
}

TEST_CASE_METHOD(pool_fixture, "storage pool: an exists lease holds off eviction for lease_ns",
                 "[actors][storage][pool]") {
  storage_options o = options(clock, 2);
  o.pool.lease_ns = 10'000;
  auto storage = spawn_storage(sys, o);
  CHECK(ask<storage_io_reply>(storage, caf::put_atom_v, storage_io{{1}, 100}).second == 1100);
  CHECK(ask<storage_io_reply>(storage, caf::put_atom_v, storage_io{{2}, 100}).second == 2200);
  CHECK(leading(storage, {1}) == 1);  // answered at 3200: 1 is leased until 13'200
  CHECK(now() == 3200);
  // A put ending at 4300 needs room: 1 is the oldest but leased, so 2 goes.
  CHECK(ask<storage_io_reply>(storage, caf::put_atom_v, storage_io{{3}, 100}).second == 4300);
  CHECK(leading(storage, {2}) == 0);
  storage_report r = report(storage);
  CHECK(r.evictions == 1);
  CHECK(r.lease_deferrals == 1);
  CHECK(r.exists_leases == 1);

  SECTION("a put that lands before the lease ends evicts around it") {
    wait_until(12'000);
    CHECK(ask<storage_io_reply>(storage, caf::put_atom_v, storage_io{{4}, 100}).second == 13'100);
    CHECK(leading(storage, {3}) == 0);
    CHECK(leading(storage, {1}) == 1);
  }
  SECTION("once the lease has ended the block is evicted like any other") {
    wait_until(13'200);
    CHECK(ask<storage_io_reply>(storage, caf::put_atom_v, storage_io{{4}, 100}).second == 14'300);
    CHECK(leading(storage, {1}) == 0);
    CHECK(leading(storage, {3}) == 1);
  }
  CHECK(report(storage).invariant_violations == 0);
}

TEST_CASE_METHOD(pool_fixture, "storage faults: a node lost at a time comes back empty",
                 "[actors][storage][faults]") {
  storage_options o = options(clock, 10, 2);
  o.faults.node_loss_at_ns = 5000;
  o.faults.node_loss_node = 1;
  o.faults.down_ns = 10'000;
  auto storage = spawn_storage(sys, o);
  uint64_t a = on_node(0, 1), b = on_node(1, 2), c = on_node(1, 3);
  CHECK(ask<storage_io_reply>(storage, caf::put_atom_v, storage_io{{a, b}, 100}).first.done == 2);
  wait_until(4500);
  // A write to node 1 in flight across the loss (ends at 4500 + 1000 + 1000) leaves no key.
  auto [late, late_at] = ask<storage_io_reply>(storage, caf::put_atom_v, storage_io{{c}, 1000});
  CHECK(late.done == 0);
  CHECK(late_at == 6500);
  CHECK(leading(storage, {a}) == 1);
  CHECK(leading(storage, {b}) == 0);  // lost with its node
  // While node 1 is down it refuses writes.
  CHECK(ask<storage_io_reply>(storage, caf::put_atom_v, storage_io{{b}, 100}).first.done == 0);
  storage_report r = report(storage);
  CHECK(r.node_losses == 1);
  CHECK(r.keys_lost == 1);
  CHECK(r.puts_lost == 1);
  CHECK(r.puts_node_down == 1);
  CHECK(r.node_returns == 0);
  wait_until(15'000);  // back, empty
  CHECK(ask<storage_io_reply>(storage, caf::put_atom_v, storage_io{{b}, 100}).first.done == 1);
  CHECK(leading(storage, {b}) == 1);
  r = report(storage);
  CHECK(r.node_returns == 1);
  CHECK(r.invariant_violations == 0);
}

TEST_CASE_METHOD(pool_fixture, "storage faults: a slow window slows the flows inside it only",
                 "[actors][storage][faults]") {
  storage_options o = options(clock, 10);
  o.faults.slow_at_ns = 1500;
  o.faults.slow_ns = 1000;
  o.faults.slow_factor = 0.5;
  auto storage = spawn_storage(sys, o);
  // 2000 bytes from 1000: 500 at full rate to 1500, 500 at half rate to 2500, 1000 more: 3500
  // (3000 without the window). The window's end must speed the flow up at 2500 exactly.
  auto [put, at] = ask<storage_io_reply>(storage, caf::put_atom_v, storage_io{{1}, 2000});
  CHECK(put.done == 1);
  CHECK(at == 3500);
  CHECK(report(storage).slow_windows == 1);
}

TEST_CASE_METHOD(pool_fixture, "storage faults: failed gets read nothing, failed puts leave nothing",
                 "[actors][storage][faults]") {
  storage_options o = options(clock, 10);
  o.faults.get_fail_probability = 1;
  auto storage = spawn_storage(sys, o);
  CHECK(ask<storage_io_reply>(storage, caf::put_atom_v, storage_io{{1, 2}, 100}).first.done == 2);
  auto [got, at] = ask<storage_io_reply>(storage, caf::get_atom_v, storage_io{{1, 2}, 100});
  CHECK(got.done == 0);
  self->send(storage, storage_release{got.lease});
  storage_report r = report(storage);
  CHECK(r.get_failures == 2);
  CHECK(r.leased_keys == 0);

  storage_options p = options(clock, 10);
  p.faults.put_fail_probability = 1;
  auto failing = spawn_storage(sys, p);
  CHECK(ask<storage_io_reply>(failing, caf::put_atom_v, storage_io{{1}, 100}).first.done == 0);
  CHECK(leading(failing, {1}) == 0);
  r = report(failing);
  CHECK(r.put_failures == 1);
  CHECK(r.stored == 0);
  CHECK(r.writes_in_flight == 0);
  CHECK(r.invariant_violations == 0);
}
