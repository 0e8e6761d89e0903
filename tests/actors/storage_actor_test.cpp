#include "actors/storage/storage.hpp"

#include "tests/actors/det_fixture.hpp"

using namespace kvtier;
using namespace kvtier::test;

namespace {

storage_options options(const sim_clock& clock, uint64_t capacity, uint32_t nodes = 1) {
  storage_options o;
  o.capacity_blocks = capacity;
  o.nodes = nodes;
  o.read_gbps = 1;   // 1 byte per ns
  o.write_gbps = 1;
  o.op_latency_ns = 1000;
  o.clock = clock;
  return o;
}

uint64_t on_node(uint64_t node, uint64_t low) {
  return node << 32 | low;  // storage_index places a key by its high 32 bits
}

}  // namespace

TEST_CASE_METHOD(det_fixture, "storage actor: put then exists, at exact virtual times",
                 "[actors][storage]") {
  auto storage = spawn_storage(sys, options(clock, 10));
  // A put of 3 blocks of 100 bytes: 1000 ns latency, then 300 bytes at 1 byte/ns.
  auto [put, put_at] = ask<storage_io_reply>(storage, caf::put_atom_v, storage_io{{1, 2, 3}, 100});
  CHECK(put.done == 3);
  CHECK(put_at == 1300);
  // exists answers the leading run after the op latency.
  auto [ex, ex_at] = ask<exists_reply>(storage, exists_query{{1, 2, 4, 3}});
  CHECK(ex.leading == 2);
  CHECK(ex_at == 2300);
  auto [rep, rep_at] = ask<storage_report>(storage, report_atom_v);
  CHECK(rep.stored == 3);
  CHECK(rep.exists_queries == 1);
  CHECK(rep.puts == 1);
  CHECK(rep_at == 2300);
}

TEST_CASE_METHOD(det_fixture, "storage actor: a get spreads over nodes and takes the slowest",
                 "[actors][storage]") {
  auto storage = spawn_storage(sys, options(clock, 10, 2));
  std::vector<uint64_t> keys{on_node(0, 1), on_node(0, 2), on_node(1, 3)};
  ask<storage_io_reply>(storage, caf::put_atom_v, storage_io{keys, 100});
  int64_t start = now();
  auto [got, at] = ask<storage_io_reply>(storage, caf::get_atom_v, storage_io{keys, 100});
  CHECK(got.done == 3);
  CHECK(got.lease != 0);
  // node 0 reads 200 bytes, node 1 reads 100, in parallel after the latency
  CHECK(at - start == 1200);
  self->send(storage, storage_release{got.lease});
  run();
}

TEST_CASE_METHOD(det_fixture, "storage actor: concurrent reads share a node's bandwidth",
                 "[actors][storage]") {
  storage_options o = options(clock, 10);
  o.op_latency_ns = 0;
  auto storage = spawn_storage(sys, o);
  ask<storage_io_reply>(storage, caf::put_atom_v, storage_io{{1, 2}, 1000});
  int64_t start = now();
  auto a = self->request(storage, caf::infinite, caf::get_atom_v, storage_io{{1}, 1000});
  auto b = self->request(storage, caf::infinite, caf::get_atom_v, storage_io{{2}, 1000});
  run();
  // each moved 1000 bytes at half of 1 byte/ns
  CHECK(now() - start == 2000);
  a.receive([](const storage_io_reply& r) { CHECK(r.done == 1); },
            [](const caf::error& e) { FAIL(caf::to_string(e)); });
  b.receive([](const storage_io_reply& r) { CHECK(r.done == 1); },
            [](const caf::error& e) { FAIL(caf::to_string(e)); });
}

TEST_CASE_METHOD(det_fixture, "storage actor: a block's stream rate caps a request",
                 "[actors][storage][cap]") {
  storage_options o = options(clock, 20);
  o.stream_read_gbps = 0.25;  // one block's read: a quarter of the node's 1 byte/ns
  o.stream_write_gbps = 0.5;
  auto storage = spawn_storage(sys, o);
  // A lone block's put: 1000 ns latency, then 100 bytes at 0.5 byte/ns.
  int64_t start = now();
  auto [put, put_at] = ask<storage_io_reply>(storage, caf::put_atom_v, storage_io{{1}, 100});
  CHECK(put.done == 1);
  CHECK(put_at - start == 1200);
  ask<storage_io_reply>(storage, caf::put_atom_v, storage_io{{2, 3, 4, 5, 6, 7, 8, 9}, 100});
  auto get = [&](std::vector<uint64_t> keys) {
    int64_t from = now();
    auto [got, at] = ask<storage_io_reply>(storage, caf::get_atom_v, storage_io{keys, 100});
    CHECK(got.done == keys.size());
    self->send(storage, storage_release{got.lease});
    run();
    return at - from;
  };
  CHECK(get({1}) == 1000 + 400);        // 100 bytes at 0.25 byte/ns
  CHECK(get({2, 3}) == 1000 + 400);     // two streams: 200 bytes at 0.5
  CHECK(get({2, 3, 4, 5}) == 1000 + 400);  // four: 400 bytes at the node's 1
  CHECK(get({2, 3, 4, 5, 6, 7, 8, 9}) == 1000 + 800);  // eight: still the node's 1
}

TEST_CASE_METHOD(det_fixture, "storage actor: the read side pays its own op latency",
                 "[actors][storage][latency]") {
  storage_options o = options(clock, 20);
  o.op_latency_ns = 3000;       // a put: create, write, rename
  o.read_op_latency_ns = 500;   // an exists or a get: open, read
  o.stream_read_gbps = 0.25;
  auto storage = spawn_storage(sys, o);
  int64_t start = now();
  auto [put, put_at] = ask<storage_io_reply>(storage, caf::put_atom_v, storage_io{{1, 2}, 100});
  CHECK(put.done == 2);
  CHECK(put_at - start == 3000 + 200);  // 200 bytes at the node's 1 byte/ns
  start = now();
  auto [ex, ex_at] = ask<exists_reply>(storage, exists_query{{1, 2, 3}});
  CHECK(ex.leading == 2);
  CHECK(ex_at - start == 500);
  start = now();
  auto [got, got_at] = ask<storage_io_reply>(storage, caf::get_atom_v, storage_io{{1}, 100});
  CHECK(got.done == 1);
  CHECK(got_at - start == 500 + 400);  // a lone block's 100 bytes at its stream's 0.25 byte/ns
  self->send(storage, storage_release{got.lease});
  run();
  // A put with nothing left to write still pays the put's latency.
  start = now();
  auto [again, again_at] = ask<storage_io_reply>(storage, caf::put_atom_v, storage_io{{1}, 100});
  CHECK(again.done == 0);
  CHECK(again_at - start == 3000);
}

TEST_CASE_METHOD(det_fixture, "storage actor: without a read op latency, gets pay the op latency",
                 "[actors][storage][latency]") {
  storage_options o = options(clock, 20);
  o.op_latency_ns = 3000;
  auto storage = spawn_storage(sys, o);
  ask<storage_io_reply>(storage, caf::put_atom_v, storage_io{{1}, 100});
  int64_t start = now();
  auto [got, got_at] = ask<storage_io_reply>(storage, caf::get_atom_v, storage_io{{1}, 100});
  CHECK(got.done == 1);
  CHECK(got_at - start == 3000 + 100);
  self->send(storage, storage_release{got.lease});
  run();
  start = now();
  auto [ex, ex_at] = ask<exists_reply>(storage, exists_query{{1}});
  CHECK(ex.leading == 1);
  CHECK(ex_at - start == 3000);
}

TEST_CASE_METHOD(det_fixture, "storage actor: LRU eviction spares leased blocks",
                 "[actors][storage]") {
  auto storage = spawn_storage(sys, options(clock, 2));
  ask<storage_io_reply>(storage, caf::put_atom_v, storage_io{{1}, 10});
  ask<storage_io_reply>(storage, caf::put_atom_v, storage_io{{2}, 10});
  auto [got, at] = ask<storage_io_reply>(storage, caf::get_atom_v, storage_io{{1}, 10});
  (void) at;
  REQUIRE(got.done == 1);
  // 1 is leased (and was just used): 3 evicts 2.
  ask<storage_io_reply>(storage, caf::put_atom_v, storage_io{{3}, 10});
  CHECK(ask<exists_reply>(storage, exists_query{{2}}).first.leading == 0);
  CHECK(ask<exists_reply>(storage, exists_query{{1}}).first.leading == 1);
  self->send(storage, storage_release{got.lease});
  run();
  // released, 1 is the least recently used: 4 evicts it.
  ask<storage_io_reply>(storage, caf::put_atom_v, storage_io{{4}, 10});
  CHECK(ask<exists_reply>(storage, exists_query{{1}}).first.leading == 0);
  CHECK(ask<exists_reply>(storage, exists_query{{3, 4}}).first.leading == 2);
  CHECK(ask<storage_report>(storage, report_atom_v).first.evictions == 2);
}
