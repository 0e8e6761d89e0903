// The wire format's replies (serve/wire/): every reply the server encodes and the client stub
// decodes, round-tripped through msgpack for representative values, empty and large lists
// included. The calls: codec_calls_test.cpp; the bytes of each pinned: codec_pins_test.cpp.

#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <map>

#include "serve/wire/call.hpp"
#include "serve/wire/error_reply.hpp"
#include "serve/wire/fields.hpp"
#include "serve/wire/map_writer.hpp"
#include "serve/wire/probe_reply.hpp"
#include "serve/wire/request_replies.hpp"
#include "serve/wire/session_replies.hpp"
#include "serve/wire/stats_reply.hpp"
#include "serve/wire/step_reply.hpp"
#include "tests/serve/codec_round_trip.hpp"

using namespace kvtier;
using namespace kvtier::serve;
using kvtier::serve::test::round_trip;

namespace {

void check_same(const admit_result& a, const admit_result& b) {
  CHECK(a.req == b.req);
  CHECK(a.admitted == b.admitted);
  CHECK(a.device_blocks == b.device_blocks);
  CHECK(a.host_blocks == b.host_blocks);
  CHECK(a.storage_blocks == b.storage_blocks);
  CHECK(a.device_tokens == b.device_tokens);
  CHECK(a.host_tokens == b.host_tokens);
  CHECK(a.storage_tokens == b.storage_tokens);
}

void check_same(const step_answer& a, const step_answer& b) {
  CHECK(a.granted.step == b.granted.step);
  REQUIRE(a.granted.admits.size() == b.granted.admits.size());
  for (size_t i = 0; i < a.granted.admits.size(); ++i)
    check_same(a.granted.admits[i], b.granted.admits[i]);
  CHECK(a.granted.failed_grows == b.granted.failed_grows);
  CHECK(a.granted.available_blocks == b.granted.available_blocks);
  CHECK(a.granted.layer_ready_ns == b.granted.layer_ready_ns);
  CHECK(a.now_ns == b.now_ns);
  REQUIRE(a.swap_in.has_value() == b.swap_in.has_value());
  if (!a.swap_in)
    return;
  CHECK(a.swap_in->slot == b.swap_in->slot);
  CHECK(a.swap_in->record == b.swap_in->record);
  CHECK(a.swap_in->layers == b.swap_in->layers);
  REQUIRE(a.swap_in->blocks.size() == b.swap_in->blocks.size());
  for (size_t i = 0; i < a.swap_in->blocks.size(); ++i) {
    CHECK(a.swap_in->blocks[i].block == b.swap_in->blocks[i].block);
    CHECK(a.swap_in->blocks[i].hash == b.swap_in->blocks[i].hash);
  }
}

step_answer large_step() {
  step_answer a;
  a.granted.step = 1ull << 40;
  for (uint32_t i = 0; i < 5000; ++i)
    a.granted.admits.push_back({i + 1, i % 3 != 0, i, 2 * i, 3 * i, 64ull * i,
                                (1ull << 33) + i, UINT64_MAX - i});
  for (uint64_t i = 0; i < 70000; ++i)
    a.granted.failed_grows.push_back(i * 977);
  a.granted.available_blocks = UINT32_MAX;
  for (int64_t l = 0; l < 128; ++l)
    a.granted.layer_ready_ns.push_back(l % 2 ? -l * 1000 : (int64_t{1} << 61) + l);
  a.now_ns = -5;
  return a;
}

}  // namespace

TEST_CASE("step replies round-trip through the codec", "[serve][codec]") {
  SECTION("empty lists, modelled") {
    step_answer a;
    a.granted.step = 3;
    a.granted.available_blocks = 17;
    a.now_ns = 123456789;
    round_trip(7, [&](auto& buf, uint64_t id) {
      encode_step_reply(buf, id, a, copy_backend_kind::modelled);
    }, [&](const msgpack::object& r) {
      CHECK(wire::find(r, "swap_in") == nullptr);
      check_same(decode_step_reply(r), a);
    });
  }
  SECTION("large lists, modelled") {
    step_answer a = large_step();
    round_trip(UINT64_MAX, [&](auto& buf, uint64_t id) {
      encode_step_reply(buf, id, a, copy_backend_kind::modelled);
    }, [&](const msgpack::object& r) { check_same(decode_step_reply(r), a); });
  }
  SECTION("real mode without a swap-in sends nil") {
    step_answer a = large_step();
    round_trip(1, [&](auto& buf, uint64_t id) {
      encode_step_reply(buf, id, a, copy_backend_kind::cuda);
    }, [&](const msgpack::object& r) {
      const msgpack::object* sw = wire::find(r, "swap_in");
      REQUIRE(sw != nullptr);
      CHECK(sw->type == msgpack::type::NIL);
      check_same(decode_step_reply(r), a);
    });
  }
  SECTION("real mode with a swap-in") {
    step_answer a;
    a.granted.step = 9;
    a.granted.admits.push_back({4, true, 1, 2, 3, 64, 128, 192});
    a.granted.layer_ready_ns = {10, 20, 30};
    a.swap_in = swap_in_slot{5, 7, 32, {}};
    for (uint32_t i = 0; i < 3000; ++i)
      a.swap_in->blocks.push_back({i * 7, (1ull << 63) + i});
    round_trip(2, [&](auto& buf, uint64_t id) {
      encode_step_reply(buf, id, a, copy_backend_kind::cuda);
    }, [&](const msgpack::object& r) { check_same(decode_step_reply(r), a); });
  }
}

TEST_CASE("probe replies round-trip through the codec", "[serve][codec]") {
  probe_reply p;
  SECTION("empty") { p.step = 0; }
  SECTION("large") {
    p.step = 1ull << 50;
    p.available_blocks = 4096;
    for (uint32_t i = 0; i < 20000; ++i)
      p.matches.push_back({i, i / 2, i / 3, 64ull * i, UINT64_MAX - i, i % 5});
    for (uint32_t i = 0; i < 20000; ++i)
      p.victim_frees.push_back(UINT32_MAX - i);
  }
  round_trip(11, [&](auto& buf, uint64_t id) { encode_probe_reply(buf, id, p); },
             [&](const msgpack::object& r) {
               probe_reply q = decode_probe_reply(r);
               CHECK(q.step == p.step);
               CHECK(q.available_blocks == p.available_blocks);
               CHECK(q.victim_frees == p.victim_frees);
               REQUIRE(q.matches.size() == p.matches.size());
               for (size_t i = 0; i < p.matches.size(); ++i) {
                 CHECK(q.matches[i].req == p.matches[i].req);
                 CHECK(q.matches[i].device_blocks == p.matches[i].device_blocks);
                 CHECK(q.matches[i].host_blocks == p.matches[i].host_blocks);
                 CHECK(q.matches[i].device_tokens == p.matches[i].device_tokens);
                 CHECK(q.matches[i].host_tokens == p.matches[i].host_tokens);
                 CHECK(q.matches[i].idle_device_blocks == p.matches[i].idle_device_blocks);
               }
             });
}

TEST_CASE("stats replies round-trip through the codec", "[serve][codec]") {
  stats_answer a;
  SECTION("zeros") { a.storage.backend = "model"; }
  SECTION("every field set") {
    a.engines = 3;
    a.requests = 1ull << 40;
    for (int i = 0; i < verb_count; ++i)
      a.calls[i] = 1000 + i;
    for (int i = 0; i < error_kind_count; ++i)
      a.errors[i] = 7 * i;
    controller_report& c = a.controller;
    c.device_used = 1;
    c.host_used = 2;
    c.tree_nodes = 3;
    c.swap_ins = 4;
    c.backups = 5;
    c.write_backs = 6;
    c.loads = 7;
    c.stores = 8;
    c.device_evictions = 9;
    c.host_evictions = 10;
    c.invariant_violations = 11;
    c.copies_in_flight = UINT64_MAX;
    a.storage = {};
    a.storage.stored = 12;
    a.storage.capacity = 13;
    a.storage.rebuilt = 14;
    a.storage.misses = 15;
    a.storage.backend = "redis";
    a.now_ns = 99;
  }
  round_trip(4, [&](auto& buf, uint64_t id) { encode_stats_reply(buf, id, a); },
             [&](const msgpack::object& r) {
               stats_answer b = decode_stats_reply(r);
               CHECK(b.engines == a.engines);
               CHECK(b.requests == a.requests);
               CHECK(b.calls == a.calls);
               CHECK(b.errors == a.errors);
               const controller_report &x = a.controller, &y = b.controller;
               CHECK(y.device_used == x.device_used);
               CHECK(y.host_used == x.host_used);
               CHECK(y.tree_nodes == x.tree_nodes);
               CHECK(y.swap_ins == x.swap_ins);
               CHECK(y.backups == x.backups);
               CHECK(y.write_backs == x.write_backs);
               CHECK(y.loads == x.loads);
               CHECK(y.stores == x.stores);
               CHECK(y.device_evictions == x.device_evictions);
               CHECK(y.host_evictions == x.host_evictions);
               CHECK(y.invariant_violations == x.invariant_violations);
               CHECK(y.copies_in_flight == x.copies_in_flight);
               CHECK(b.storage.stored == a.storage.stored);
               CHECK(b.storage.capacity == a.storage.capacity);
               CHECK(b.storage.rebuilt == a.storage.rebuilt);
               CHECK(b.storage.misses == a.storage.misses);
               CHECK(b.storage.backend == a.storage.backend);
               CHECK(b.now_ns == a.now_ns);
             });
}

TEST_CASE("lookup, allocate and wait replies round-trip through the codec",
          "[serve][codec]") {
  lookup_answer l{{4, 5, 256, 320}, 6, UINT64_MAX};
  round_trip(1, [&](auto& buf, uint64_t id) { encode_lookup_reply(buf, id, l); },
             [&](const msgpack::object& r) {
               lookup_answer m = decode_lookup_reply(r);
               CHECK(m.hit.device_blocks == 4);
               CHECK(m.hit.host_blocks == 5);
               CHECK(m.hit.device_tokens == 256);
               CHECK(m.hit.host_tokens == 320);
               CHECK(m.storage_blocks == 6);
               CHECK(m.storage_tokens == UINT64_MAX);
             });
  ready done{42, 7, UINT32_MAX};
  round_trip(2, [&](auto& buf, uint64_t id) { encode_allocate_reply(buf, id, done); },
             [&](const msgpack::object& r) {
               CHECK(wire::str(r, "state") == "ready");
               std::optional<ready> got = decode_allocate_reply(r, 42);
               REQUIRE(got);
               CHECK(got->req == 42);
               CHECK(got->prefetched_blocks == 7);
               CHECK(got->available_blocks == UINT32_MAX);
             });
  round_trip(3, [&](auto& buf, uint64_t id) { encode_allocate_reply(buf, id, std::nullopt); },
             [&](const msgpack::object& r) {
               CHECK(wire::str(r, "state") == "pending");
               CHECK_FALSE(decode_allocate_reply(r, 42));
             });
  round_trip(4, [&](auto& buf, uint64_t id) { encode_wait_reply(buf, id, done); },
             [&](const msgpack::object& r) {
               ready got = decode_wait_reply(r, 42);
               CHECK(got.prefetched_blocks == 7);
               CHECK(got.available_blocks == UINT32_MAX);
             });
}

TEST_CASE("the codec refuses replies that do not fit the protocol", "[serve][codec]") {
  msgpack::sbuffer buf;
  map_writer w(buf, 3);
  w.put("id", 1);
  w.put("ok", true);
  w.put_str("state", "maybe");
  msgpack::object_handle h = msgpack::unpack(buf.data(), buf.size());
  CHECK_THROWS_WITH(decode_allocate_reply(h.get(), 1), Catch::Contains("'state'"));
  CHECK_THROWS_WITH(decode_probe_reply(h.get()), Catch::Contains("'step'"));
  CHECK_THROWS_WITH(decode_step_reply(h.get()), Catch::Contains("'step'"));
}
