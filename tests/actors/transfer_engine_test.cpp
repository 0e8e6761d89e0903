#include "actors/transfer_engine/transfer_engine.hpp"

#include "actors/storage/storage.hpp"
#include "tests/actors/det_fixture.hpp"

using namespace kvtier;
using namespace kvtier::test;

namespace {

// 4 layers, 4096 bytes per block (1024 per layer), PCIe 1 byte/ns per direction, 1.5 both ways.
transfer_engine_options options(const sim_clock& clock) {
  transfer_engine_options o;
  o.layers = 4;
  o.block_bytes = 4096;
  o.links.h2d_gbps = 1;
  o.links.d2h_gbps = 1;
  o.links.duplex_gbps = 1.5;
  o.links.h2d_layer_latency_ns = 100;
  o.links.d2h_latency_ns = 500;
  o.links.nic_gbps = 2;
  o.links.nic_latency_ns = 50;
  o.clock = clock;
  return o;
}

storage_options storage_opts(const sim_clock& clock) {
  storage_options o;
  o.capacity_blocks = 100;
  o.read_gbps = 1;
  o.write_gbps = 1;
  o.op_latency_ns = 1000;
  o.clock = clock;
  return o;
}

transfer make(uint64_t id, transfer_kind kind, std::vector<uint64_t> keys, std::vector<uint64_t> after = {}) {
  transfer t;
  t.id = id;
  t.kind = kind;
  for (uint64_t k : keys)
    t.blocks.push_back({static_cast<uint32_t>(k), static_cast<uint32_t>(k), k, k});
  t.after = std::move(after);
  return t;
}

}  // namespace

TEST_CASE_METHOD(det_fixture, "transfer engine: a swap-in completes layer by layer",
                 "[actors][transfer_engine]") {
  auto storage = spawn_storage(sys, storage_opts(clock));
  auto engine = spawn_transfer_engine(sys, options(clock), storage);
  auto [done, at] = ask<transfer_done>(engine, make(1, transfer_kind::swap_in, {7, 8}));
  // per layer: 100 ns latency, then 2 blocks x 1024 bytes at 1 byte/ns
  CHECK(done.ok);
  CHECK(done.layer_done_ns == std::vector<int64_t>{2148, 4296, 6444, 8592});
  CHECK(done.done_ns == 8592);
  CHECK(at == 8592);
}

TEST_CASE_METHOD(det_fixture, "transfer engine: a D2H moves all layers at once",
                 "[actors][transfer_engine]") {
  auto storage = spawn_storage(sys, storage_opts(clock));
  auto engine = spawn_transfer_engine(sys, options(clock), storage);
  auto [done, at] = ask<transfer_done>(engine, make(1, transfer_kind::backup, {7, 8}));
  CHECK(done.layer_done_ns.empty());
  CHECK(at == 500 + 8192);
}

TEST_CASE_METHOD(det_fixture, "transfer engine: both directions share the duplex limit",
                 "[actors][transfer_engine]") {
  auto storage = spawn_storage(sys, storage_opts(clock));
  transfer_engine_options o = options(clock);
  o.links.h2d_layer_latency_ns = 0;
  o.links.d2h_latency_ns = 0;
  auto engine = spawn_transfer_engine(sys, o, storage);
  auto in = self->request(engine, caf::infinite, make(1, transfer_kind::swap_in, {1}));
  auto out = self->request(engine, caf::infinite, make(2, transfer_kind::backup, {2}));
  run();
  // Alone each direction gets 1 byte/ns; together they share 1.5: 0.75 each, so 4096 bytes
  // take 5462 ns (4096 alone).
  in.receive([](const transfer_done& d) {
               CHECK(d.done_ns == Approx(5462).margin(2));
               REQUIRE(d.layer_done_ns.size() == 4);
               CHECK(d.layer_done_ns[0] == Approx(1366).margin(1));
             },
             [](const caf::error& e) { FAIL(caf::to_string(e)); });
  out.receive([](const transfer_done& d) { CHECK(d.done_ns == Approx(5462).margin(2)); },
              [](const caf::error& e) { FAIL(caf::to_string(e)); });
  auto [rep, at] = ask<engine_report>(engine, report_atom_v);
  (void) at;
  CHECK(kvtier::at(rep.transfers, transfer_kind::swap_in) == 1);
  CHECK(kvtier::at(rep.bytes, transfer_kind::backup) == 4096);
}

TEST_CASE_METHOD(det_fixture, "transfer engine: a transfer waits for the ones it must follow",
                 "[actors][transfer_engine]") {
  auto storage = spawn_storage(sys, storage_opts(clock));
  auto engine = spawn_transfer_engine(sys, options(clock), storage);
  auto first = self->request(engine, caf::infinite, make(1, transfer_kind::backup, {1}));
  auto second = self->request(engine, caf::infinite, make(2, transfer_kind::swap_in, {1}, {1}));
  run();
  int64_t first_done = 0;
  first.receive([&](const transfer_done& d) { first_done = d.done_ns; },
                [](const caf::error& e) { FAIL(caf::to_string(e)); });
  CHECK(first_done == 500 + 4096);
  second.receive(
    [&](const transfer_done& d) {
      // it started only when the D2H finished: 4 layers of 100 + 1024 ns after that
      CHECK(d.done_ns == first_done + 4 * 1124);
    },
    [](const caf::error& e) { FAIL(caf::to_string(e)); });
}

TEST_CASE_METHOD(det_fixture, "transfer engine: storage transfers stream through media and network",
                 "[actors][transfer_engine][storage]") {
  auto storage = spawn_storage(sys, storage_opts(clock));
  auto engine = spawn_transfer_engine(sys, options(clock), storage);
  // A store's bytes cross the network (50 + 8192 / 2 ns) and storage's media (1000 + 8192 ns)
  // at once: it takes as long as the slower, not the sum (docs/design.md, "The timed replay").
  auto [stored, stored_at] = ask<transfer_done>(engine, make(1, transfer_kind::store, {5, 6}));
  CHECK(stored.ok);
  CHECK(stored_at == 1000 + 8192);
  CHECK(ask<exists_reply>(storage, exists_query{{5, 6}}).first.leading == 2);
  // A load: storage reads (1000 + 8192 ns) while the network carries (50 + 4096 ns).
  int64_t start = now();
  auto [loaded, loaded_at] = ask<transfer_done>(engine, make(2, transfer_kind::load, {5, 6}));
  CHECK(loaded.ok);
  CHECK(loaded_at - start == 1000 + 8192);
  // A block storage does not hold fails the load.
  auto [missing, at] = ask<transfer_done>(engine, make(3, transfer_kind::load, {5, 9}));
  (void) at;
  CHECK_FALSE(missing.ok);
  CHECK(missing.error.find("storage") != std::string::npos);
}

TEST_CASE_METHOD(det_fixture, "transfer engine: a storage load as slow as its network link",
                 "[actors][transfer_engine][storage]") {
  auto storage = spawn_storage(sys, storage_opts(clock));
  transfer_engine_options o = options(clock);
  o.links.nic_gbps = 0.5;  // below the media's 1 byte/ns: the network is the bottleneck
  auto engine = spawn_transfer_engine(sys, o, storage);
  // The store: max(50 + 8192 / 0.5, 1000 + 8192) ns.
  CHECK(ask<transfer_done>(engine, make(1, transfer_kind::store, {5, 6})).second == 50 + 16384);
  int64_t start = now();
  auto [loaded, loaded_at] = ask<transfer_done>(engine, make(2, transfer_kind::load, {5, 6}));
  CHECK(loaded.ok);
  CHECK(loaded_at - start == 50 + 16384);
}

TEST_CASE_METHOD(det_fixture,
                 "transfer engine: storage loads at once share each link fairly, bytes once",
                 "[actors][transfer_engine][storage]") {
  storage_options so = storage_opts(clock);
  so.read_gbps = 3;  // faster than the 2-byte/ns network alone, slower than it shared by 2
  auto storage = spawn_storage(sys, so);
  transfer_engine_options o = options(clock);
  auto engine = spawn_transfer_engine(sys, o, storage);
  ask<transfer_done>(engine, make(1, transfer_kind::store, {1, 2, 3, 4}));
  // Two loads of two blocks (8192 bytes each) together: the network gives each 1 byte/ns
  // (50 + 8192 ns), the media 1.5 (1000 + 5462 ns): the network decides. Alone, one would take
  // max(50 + 4096, 1000 + 2731) = 4146 ns.
  int64_t start = now();
  auto a = self->request(engine, caf::infinite, make(2, transfer_kind::load, {1, 2}));
  auto b = self->request(engine, caf::infinite, make(3, transfer_kind::load, {3, 4}));
  run();
  for (auto* pending : {&a, &b})
    pending->receive(
      [&](const transfer_done& d) {
        CHECK(d.ok);
        CHECK(d.done_ns - start == 50 + 8192);
      },
      [](const caf::error& e) { FAIL(caf::to_string(e)); });
  // Every link counts each transfer's bytes once: the network the store's and both loads', the
  // media's write side the store's, its read side the loads'.
  auto [rep, at] = ask<engine_report>(engine, report_atom_v);
  (void) at;
  uint64_t nic = 0;
  for (const link_report& l : rep.links)
    if (l.name == "nic")
      nic = l.bytes;
  CHECK(nic == 2 * 16384);
  CHECK(kvtier::at(rep.bytes, transfer_kind::load) == 2 * 8192);
  CHECK(kvtier::at(rep.bytes, transfer_kind::store) == 16384);
  auto [pool, at2] = ask<storage_report>(storage, report_atom_v);
  (void) at2;
  REQUIRE(pool.nodes.size() == 2);
  CHECK(pool.nodes[0].bytes == 16384);
  CHECK(pool.nodes[1].bytes == 16384);
}

TEST_CASE_METHOD(det_fixture,
                 "transfer engine: transfers freed together that end at once each run once",
                 "[actors][transfer_engine]") {
  // Two fills (done as they start) both follow one D2H. When the D2H ends both become ready; the
  // first fill ends at once and frees the second, which must not be started again afterwards
  // (it once was: the engine died of a lookup of the finished fill).
  auto storage = spawn_storage(sys, storage_opts(clock));
  auto engine = spawn_transfer_engine(sys, options(clock), storage);
  auto first = self->request(engine, caf::infinite, make(1, transfer_kind::backup, {1}));
  auto a = self->request(engine, caf::infinite, make(2, transfer_kind::fill, {2}, {1}));
  auto b = self->request(engine, caf::infinite, make(3, transfer_kind::fill, {3}, {1}));
  auto c = self->request(engine, caf::infinite, make(4, transfer_kind::fill, {4}, {1}));
  run();
  std::vector<uint64_t> done;
  for (auto* pending : {&first, &a, &b, &c})
    pending->receive([&](const transfer_done& d) { done.push_back(d.id); },
                     [&](const caf::error& e) { FAIL(caf::to_string(e)); });
  CHECK(done == std::vector<uint64_t>{1, 2, 3, 4});
  auto [report, at] = ask<engine_report>(engine, report_atom_v);
  CHECK(kvtier::at(report.transfers, transfer_kind::fill) == 3);
}
