// The wire format (serve/wire/): every call the client stub encodes and the server decodes, and
// every reply the server encodes and the client stub decodes, round-tripped through msgpack for
// representative values, empty and large lists included; and the bytes of each pinned.

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

using namespace kvtier;
using namespace kvtier::serve;

namespace {

// Encodes with `encode`, checks the common keys and hands the decoded map to `check`.
template <class Encode, class Check>
void round_trip(uint64_t id, Encode encode, Check check) {
  msgpack::sbuffer buf;
  encode(buf, id);
  msgpack::object_handle h = msgpack::unpack(buf.data(), buf.size());
  const msgpack::object& root = h.get();
  REQUIRE(root.type == msgpack::type::MAP);
  CHECK(wire::u64(root, "id") == id);
  CHECK(wire::flag(root, "ok"));
  check(root);
}

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

// -- calls ----------------------------------------------------------------------------------------

namespace {

call decoded(const call& c) {
  msgpack::sbuffer buf;
  encode_call(buf, c);
  call out;
  std::optional<wire_error> e = decode_call(buf.data(), buf.size(), out);
  INFO((e ? e->message : std::string()));
  REQUIRE_FALSE(e);
  return out;
}

void check_same(const std::vector<token_mark>& a, const std::vector<token_mark>& b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].req == b[i].req);
    CHECK(a[i].tokens == b[i].tokens);
  }
}

// Entry i's device block ids; an entry without any has an empty list, as the decoder gives it.
std::vector<uint32_t> ids_at(const std::vector<std::vector<uint32_t>>& lists, size_t i) {
  return i < lists.size() ? lists[i] : std::vector<uint32_t>{};
}

void check_same_step(const call& a, const call& b) {
  CHECK(a.step.step == b.step.step);
  check_same(a.step.computed, b.step.computed);
  CHECK(a.step.finished == b.step.finished);
  check_same(a.step.preempted, b.step.preempted);
  check_same(a.step.grows, b.step.grows);
  check_same(a.step.admits, b.step.admits);
  for (size_t i = 0; i < a.step.grows.size(); ++i)
    CHECK(ids_at(a.step.grow_blocks, i) == ids_at(b.step.grow_blocks, i));
  for (size_t i = 0; i < a.step.admits.size(); ++i)
    CHECK(ids_at(a.step.admit_blocks, i) == ids_at(b.step.admit_blocks, i));
  CHECK(a.evicted == b.evicted);
}

void check_same_hello(const call& a, const call& b) {
  CHECK(a.versions == b.versions);
  CHECK(a.name == b.name);
  CHECK(a.model.name == b.model.name);
  CHECK(a.model.layers == b.model.layers);
  CHECK(a.model.kv_heads == b.model.kv_heads);
  CHECK(a.model.head_dim == b.model.head_dim);
  CHECK(a.model.kv_dtype == b.model.kv_dtype);
  CHECK(a.block_size == b.block_size);
  CHECK(a.tiers == b.tiers);
  CHECK(a.config == b.config);
  CHECK(a.tensors.present == b.tensors.present);
  CHECK(a.tensors.device_blocks == b.tensors.device_blocks);
  CHECK(a.tensors.layer_handles == b.tensors.layer_handles);
  CHECK(a.tensors.layer_offsets == b.tensors.layer_offsets);
  CHECK(a.tensors.event_slots == b.tensors.event_slots);
  CHECK(a.tensors.events == b.tensors.events);
  CHECK(a.model.latent_dim == b.model.latent_dim);
  CHECK(a.model.kv_lora_rank == b.model.kv_lora_rank);
  CHECK(a.model.rope_head_dim == b.model.rope_head_dim);
  CHECK(a.tensors == b.tensors);
}

// Every field a call of any verb may carry.
void check_same(const call& a, const call& b) {
  CHECK(a.op == b.op);
  CHECK(a.id == b.id);
  CHECK(a.token == b.token);
  CHECK(a.engine == b.engine);
  check_same_hello(a, b);
  CHECK(a.blocks == b.blocks);
  CHECK(a.repeats == b.repeats);
  CHECK(a.text.kind == b.text.kind);
  CHECK(a.text.tokens == b.text.tokens);
  CHECK(a.text.extra_keys == b.text.extra_keys);
  REQUIRE(a.text.blocks.size() == b.text.blocks.size());
  for (size_t i = 0; i < a.text.blocks.size(); ++i) {
    CHECK(a.text.blocks[i].hash == b.text.blocks[i].hash);
    CHECK(a.text.blocks[i].tokens == b.text.blocks[i].tokens);
  }
  CHECK(a.computed_tokens == b.computed_tokens);
  CHECK(a.req == b.req);
  CHECK(a.tokens == b.tokens);
  CHECK(a.probe.candidates == b.probe.candidates);
  CHECK(a.probe.grow_blocks == b.probe.grow_blocks);
  CHECK(a.probe.victims == b.probe.victims);
  check_same_step(a, b);
}

call call_of(verb op, uint64_t id = 5) {
  call c;
  c.op = op;
  c.id = id;
  c.engine = 3;
  return c;
}

attach_request some_tensors(uint32_t layers) {
  attach_request t;
  t.present = true;
  t.device_blocks = 1000;
  for (uint32_t l = 0; l < layers; ++l) {
    ipc_bytes h;
    h.fill(static_cast<uint8_t>(l));
    t.layer_handles.push_back(h);
    t.layer_offsets.push_back(uint64_t{l} << 33);
  }
  t.event_slots = 4;
  for (uint32_t e = 0; e < 4 * layers; ++e) {
    ipc_bytes h;
    h.fill(static_cast<uint8_t>(200 + e % 50));
    t.events.push_back(h);
  }
  return t;
}

std::vector<token_mark> marks(uint32_t n, uint64_t from) {
  std::vector<token_mark> out;
  for (uint32_t i = 0; i < n; ++i)
    out.push_back({from + i, i * 64 + 1});
  return out;
}

}  // namespace

TEST_CASE("calls round-trip: hello, plain and with tensors, tiers and config", "[serve][codec]") {
  call c = call_of(verb::hello);
  c.engine.reset();
  c.token = "sekrit";
  c.versions = {1, 2, 3};
  c.name = "engine \xc3\xa9";
  c.model = {"llama3-8b", 32, 8, 128, "bf16"};
  c.block_size = 64;
  check_same(decoded(c), c);
  c.tiers = {"device", "host"};
  c.config = {{"cache.device_blocks", "4096"}, {"cache.eviction", "\"lru\""}};
  c.tensors = some_tensors(80);
  check_same(decoded(c), c);
  // A key named twice, or a value that is not text, is malformed.
  c.config.push_back({"cache.device_blocks", "8"});
  msgpack::sbuffer buf;
  encode_call(buf, c);
  call back;
  auto err = decode_call(buf.data(), buf.size(), back);
  REQUIRE(err);
  CHECK(err->kind == error_kind::malformed);
  CHECK_THAT(err->message, Catch::Contains("'cache.device_blocks' twice"));
}

TEST_CASE("hello's MLA latent: its parts make latent_dim, or must agree with it",
          "[serve][codec]") {
  call c = call_of(verb::hello);
  c.engine.reset();
  c.versions = {3};
  c.name = "engine-sim";
  c.block_size = 64;
  c.model = {"deepseek-v3", 61, 1, 128, "bf16"};
  c.model.kv_lora_rank = 512;
  c.model.rope_head_dim = 64;
  c.model.latent_dim = 576;
  check_same(decoded(c), c);
  // The parts alone: the decoder sums them (an engine that does not send latent_dim).
  msgpack::sbuffer buf;
  msgpack::packer<msgpack::sbuffer> pk(buf);
  auto hello_with = [&](uint32_t latent) {
    buf.clear();
    pk.pack_map(5);
    pk.pack(std::string("op"));
    pk.pack(std::string("hello"));
    pk.pack(std::string("id"));
    pk.pack(1);
    pk.pack(std::string("versions"));
    pk.pack(std::vector<uint32_t>{1});
    pk.pack(std::string("block_size"));
    pk.pack(64);
    pk.pack(std::string("model"));
    pk.pack_map(latent > 0 ? 8 : 7);
    pk.pack(std::string("name"));
    pk.pack(std::string("deepseek-v3"));
    pk.pack(std::string("kv_dtype"));
    pk.pack(std::string("bf16"));
    for (const char* k : {"layers", "kv_heads", "head_dim"}) {
      pk.pack(std::string(k));
      pk.pack(1);
    }
    pk.pack(std::string("kv_lora_rank"));
    pk.pack(512);
    pk.pack(std::string("rope_head_dim"));
    pk.pack(64);
    if (latent > 0) {
      pk.pack(std::string("latent_dim"));
      pk.pack(latent);
    }
    call out;
    std::optional<wire_error> e = decode_call(buf.data(), buf.size(), out);
    return std::make_pair(out.model.latent_dim, e);
  };
  auto [sum, ok] = hello_with(0);
  CHECK_FALSE(ok);
  CHECK(sum == 576);
  auto [given, bad] = hello_with(512);
  REQUIRE(bad);
  CHECK(bad->kind == error_kind::malformed);
  CHECK_THAT(bad->message, Catch::Contains("'model.latent_dim' is 512, not model.kv_lora_rank + "
                                           "model.rope_head_dim = 576"));
}

TEST_CASE("calls round-trip: attach, tensors in shared memory, strides, MLA", "[serve][codec]") {
  call c = call_of(verb::attach);
  c.engine.reset();
  c.model = {"deepseek-v3", 61, 1, 576, "bf16"};
  c.model.latent_dim = 576;
  c.block_size = 64;
  c.tensors.present = true;
  c.tensors.memory = tensor_memory::shm;
  c.tensors.device_blocks = 100;
  for (uint32_t l = 0; l < 61; ++l) {
    c.tensors.layer_segments.push_back("/psm_kv" + std::to_string(l % 2));
    c.tensors.layer_offsets.push_back(uint64_t{l / 2} << 24);
  }
  c.tensors.block_stride = 64 * 576 * 2;
  c.tensors.event_slots = 8;
  c.tensors.signals = "/psm_signals";
  check_same(decoded(c), c);
  // K beside V (FlashInfer): both strides travel.
  c.model = {"llama3-8b", 2, 8, 128, "bf16"};
  c.tensors.layer_segments.resize(2);
  c.tensors.layer_offsets.resize(2);
  c.tensors.half_stride = 1 << 15;
  c.tensors.block_stride = 1 << 16;
  check_same(decoded(c), c);
  // The same layers as CUDA IPC handles decode; an attach without tensors is refused.
  c.tensors.memory = tensor_memory::cuda_ipc;
  c.tensors.layer_handles.assign(2, ipc_bytes{});
  c.tensors.events.assign(16, ipc_bytes{});
  msgpack::sbuffer buf;
  encode_call(buf, c);  // handles: well formed
  call back;
  CHECK_FALSE(decode_call(buf.data(), buf.size(), back));
  msgpack::sbuffer bare;
  msgpack::packer<msgpack::sbuffer> pk(bare);
  pk.pack_map(4);
  pk.pack(std::string("op"));
  pk.pack(std::string("attach"));
  pk.pack(std::string("id"));
  pk.pack(1);
  pk.pack(std::string("model"));
  pk.pack_map(5);
  for (const char* k : {"name", "kv_dtype"}) {
    pk.pack(std::string(k));
    pk.pack(std::string(k[0] == 'n' ? "llama3-8b" : "bf16"));
  }
  for (const char* k : {"layers", "kv_heads", "head_dim"}) {
    pk.pack(std::string(k));
    pk.pack(8);
  }
  pk.pack(std::string("block_size"));
  pk.pack(64);
  auto err = decode_call(bare.data(), bare.size(), back);
  REQUIRE(err);
  CHECK_THAT(err->message, Catch::Contains("tensors"));
}

TEST_CASE("attach replies round-trip through the codec", "[serve][codec]") {
  msgpack::sbuffer buf;
  encode_attach_reply(buf, 9, {61, 4096, 61ull * 64 * 576 * 2, true});
  msgpack::object_handle oh = msgpack::unpack(buf.data(), buf.size());
  attach_answer a = decode_attach_reply(oh.get());
  CHECK(a.layers == 61);
  CHECK(a.device_blocks == 4096);
  CHECK(a.block_bytes == 61ull * 64 * 576 * 2);
  CHECK(a.verify);
}

TEST_CASE("calls round-trip: lookup and allocate, in each prompt form", "[serve][codec]") {
  for (verb op : {verb::lookup, verb::allocate}) {
    call c = call_of(op);
    if (op == verb::allocate)
      c.req = UINT64_MAX;
    c.text.kind = prompt::form::tokens;
    for (int32_t t = -5; t < 5000; ++t)
      c.text.tokens.push_back(t * 100000);
    c.text.extra_keys = {1, UINT64_MAX};
    if (op == verb::lookup)
      c.computed_tokens = 4096;
    check_same(decoded(c), c);
    c.text = {};
    c.text.kind = prompt::form::hashes;
    for (uint64_t h = 0; h < 3000; ++h)
      c.text.blocks.push_back({h * 0x9e3779b97f4a7c15ull, 0});
    check_same(decoded(c), c);
    c.text.kind = prompt::form::blocks;
    for (cache_block& b : c.text.blocks)
      b.tokens = 64;
    c.text.blocks.back().tokens = 3;
    check_same(decoded(c), c);
  }
  call again = call_of(verb::allocate);  // a request asked again, without a prompt
  again.req = 9;
  check_same(decoded(again), again);
}

TEST_CASE("calls round-trip: the one-request verbs, the shorthands and probe",
          "[serve][codec]") {
  for (verb op : {verb::wait, verb::free, verb::finish, verb::commit, verb::save,
                  verb::preempt}) {
    call c = call_of(op);
    c.req = 1ull << 50;
    if (op == verb::commit || op == verb::save || op == verb::preempt)
      c.tokens = UINT32_MAX;
    check_same(decoded(c), c);
  }
  call c = call_of(verb::probe);
  c.probe.step = c.step.step = 1ull << 40;  // the decoder reads `step` into both
  for (uint64_t r = 0; r < 5000; ++r)
    c.probe.candidates.push_back(r);
  c.probe.grow_blocks = UINT32_MAX;
  c.probe.victims = {7, 8, 9};
  check_same(decoded(c), c);
}

TEST_CASE("calls round-trip: step, empty, large, with the engine's device block ids",
          "[serve][codec]") {
  call c = call_of(verb::step);
  c.step.step = c.probe.step = 1;
  check_same(decoded(c), c);
  c.step.step = c.probe.step = UINT64_MAX;
  c.step.computed = marks(4000, 1);
  for (uint64_t r = 0; r < 1000; ++r)
    c.step.finished.push_back(r * 3);
  c.step.preempted = marks(100, 9000);
  c.step.grows = marks(2000, 1);
  c.step.admits = marks(500, 20000);
  check_same(decoded(c), c);
  c.step.grow_blocks.assign(c.step.grows.size(), {});
  c.step.grow_blocks[1999] = {1, UINT32_MAX};
  for (size_t i = 0; i < c.step.admits.size(); ++i)
    c.step.admit_blocks.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(i + 1)});
  c.evicted = {0, 5, UINT32_MAX};
  check_same(decoded(c), c);
}

TEST_CASE("calls round-trip: stats, ping, bye, bench_swap", "[serve][codec]") {
  for (verb op : {verb::stats, verb::ping, verb::bye}) {
    call c = call_of(op, 0);
    check_same(decoded(c), c);
    c.engine.reset();
    check_same(decoded(c), c);
  }
  call b = call_of(verb::bench_swap);
  b.blocks = 4096;
  b.repeats = 1000;
  check_same(decoded(b), b);
}

// -- session replies --------------------------------------------------------------------------------

TEST_CASE("hello, ping, bye, bench_swap and error replies round-trip", "[serve][codec]") {
  for (uint32_t version : {1u, 2u, 3u}) {
    hello_answer a;
    a.version = version;
    a.attached = version >= 2;
    a.verify = version >= 2;
    a.owner = version >= 3 ? session::device_owner::engine : session::device_owner::kvtier;
    a.engine = UINT64_MAX;
    a.block_size = 64;
    a.layers = 80;
    a.device_blocks = UINT32_MAX;
    a.host_blocks = 0;
    a.tiers = {"device", "storage"};
    a.now_ns = -7;
    a.speed = version == 1 ? 1.0 : 0.25;  // msgpack-c writes 1.0 as the integer 1
    a.kvtier = {"0.1.0", "abc-dirty", "Release", "GNU 12.2.0", "none"};
    round_trip(version, [&](auto& buf, uint64_t id) { encode_hello_reply(buf, id, a); },
               [&](const msgpack::object& r) {
                 CHECK((wire::find(r, "attached") != nullptr) == (version >= 2));
                 CHECK((wire::find(r, "device_owner") != nullptr) == (version >= 3));
                 hello_answer b = decode_hello_reply(r);
                 CHECK(b.version == a.version);
                 CHECK(b.attached == a.attached);
                 CHECK(b.verify == a.verify);
                 CHECK(b.owner == a.owner);
                 CHECK(b.engine == a.engine);
                 CHECK(b.block_size == a.block_size);
                 CHECK(b.layers == a.layers);
                 CHECK(b.device_blocks == a.device_blocks);
                 CHECK(b.host_blocks == a.host_blocks);
                 CHECK(b.tiers == a.tiers);
                 CHECK(b.now_ns == a.now_ns);
                 CHECK(b.speed == a.speed);
                 CHECK(b.kvtier.commit == a.kvtier.commit);
                 CHECK(b.kvtier.cuda == a.kvtier.cuda);
               });
  }
  round_trip(9, [](auto& buf, uint64_t id) { encode_ping_reply(buf, id, INT64_MIN); },
             [](const msgpack::object& r) { CHECK(decode_ping_reply(r) == INT64_MIN); });
  round_trip(9, [](auto& buf, uint64_t id) { encode_bye_reply(buf, id, 12345); },
             [](const msgpack::object& r) { CHECK(decode_bye_reply(r) == 12345); });
  bench_swap_answer s{1ull << 33, {1.5, 20.25, 0}, 63, 32, {}};
  for (uint32_t i = 0; i < 2000; ++i)
    s.blocks.push_back({i, UINT64_MAX - i});
  round_trip(2, [&](auto& buf, uint64_t id) { encode_bench_swap_reply(buf, id, s); },
             [&](const msgpack::object& r) {
               bench_swap_answer t = decode_bench_swap_reply(r);
               CHECK(t.bytes == s.bytes);
               CHECK(t.gbps == s.gbps);
               CHECK(t.slot == s.slot);
               CHECK(t.layers == s.layers);
               REQUIRE(t.blocks.size() == s.blocks.size());
               CHECK(t.blocks[1999].hash == s.blocks[1999].hash);
             });
  std::string bytes = encode_error(77, "bad_request", "request \xff named");
  msgpack::object_handle h = msgpack::unpack(bytes.data(), bytes.size());
  CHECK(wire::u64(h.get(), "id") == 77);
  std::optional<refusal_answer> e = decode_error(h.get());
  REQUIRE(e);
  CHECK(e->kind == "bad_request");
  CHECK(e->message == "request \\xff named");
  msgpack::sbuffer ok;
  encode_ping_reply(ok, 1, 0);
  CHECK_FALSE(decode_error(msgpack::unpack(ok.data(), ok.size()).get()));
}

// -- the bytes --------------------------------------------------------------------------------------

namespace {

std::string hex(const char* data, size_t n) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    auto b = static_cast<unsigned char>(data[i]);
    out += digits[b >> 4];
    out += digits[b & 0xf];
  }
  return out;
}

std::string hex(const msgpack::sbuffer& b) { return hex(b.data(), b.size()); }

// tests/serve/data/wire_pins.txt: one message a line, `name hex`.
std::map<std::string, std::string> pins() {
  std::ifstream in(std::string(KVTIER_SOURCE_DIR) + "/tests/serve/data/wire_pins.txt");
  REQUIRE(in);
  std::map<std::string, std::string> out;
  std::string name, bytes;
  while (in >> name >> bytes)
    out[name] = bytes;
  return out;
}

std::string call_hex(verb op, uint64_t id, const std::string& token, uint64_t engine,
                     const std::function<void(call&)>& fill) {
  call c;
  c.op = op;
  c.id = id;
  if (!token.empty())
    c.token = token;
  if (engine)
    c.engine = engine;
  fill(c);
  msgpack::sbuffer b;
  encode_call(b, c);
  return hex(b);
}

model_shape pin_model() { return {"llama3-8b", 32, 8, 128, "bf16"}; }

attach_request pin_tensors() {
  attach_request t;
  t.present = true;
  t.device_blocks = 100;
  for (int l = 0; l < 2; ++l) {
    ipc_bytes b;
    b.fill(static_cast<uint8_t>(7 + l));
    t.layer_handles.push_back(b);
    t.layer_offsets.push_back(4096u * l);
  }
  t.event_slots = 2;
  for (int e = 0; e < 4; ++e) {
    ipc_bytes b;
    b.fill(static_cast<uint8_t>(40 + e));
    t.events.push_back(b);
  }
  return t;
}

commit pin_step(bool ids) {
  commit c;
  c.step = 12;
  c.computed = {{4, 128}};
  c.finished = {9};
  c.preempted = {{5, 0}};
  c.grows = {{4, 300}};
  c.admits = {{6, 64}, {7, 129}};
  if (ids) {
    c.grow_blocks = {{3, 4}};
    c.admit_blocks = {{1}, {2, 8, 9}};
  }
  return c;
}

std::map<std::string, std::string> reply_bytes() {
  std::map<std::string, std::string> got;
  auto put = [&](const char* name, const std::function<void(msgpack::sbuffer&)>& encode) {
    msgpack::sbuffer b;
    encode(b);
    got[name] = hex(b);
  };
  put("lookup", [](auto& b) { encode_lookup_reply(b, 1, {{4, 5, 256, 320}, 6, 1ull << 40}); });
  put("allocate_ready", [](auto& b) { encode_allocate_reply(b, 2, ready{42, 7, 300}); });
  put("allocate_pending", [](auto& b) { encode_allocate_reply(b, 3, std::nullopt); });
  put("wait", [](auto& b) { encode_wait_reply(b, 4, ready{42, 7, 300}); });
  probe_reply p{77, 12, {{1, 2, 3, 128, 192, 1}}, {4, 5}};
  put("probe", [&](auto& b) { encode_probe_reply(b, 5, p); });
  step_answer sa;
  sa.granted.step = 9;
  sa.granted.admits = {{4, true, 1, 2, 3, 64, 128, 192}, {5, false}};
  sa.granted.failed_grows = {8};
  sa.granted.available_blocks = 17;
  sa.granted.layer_ready_ns = {10, -20};
  sa.now_ns = 99;
  put("step_modelled", [&](auto& b) { encode_step_reply(b, 6, sa, copy_backend_kind::modelled); });
  put("step_cuda_nil", [&](auto& b) { encode_step_reply(b, 7, sa, copy_backend_kind::cuda); });
  step_answer swap = sa;
  swap.swap_in = swap_in_slot{3, 2, 32, {{5, 1ull << 62}, {6, 2}}};
  put("step_cuda_swap", [&](auto& b) { encode_step_reply(b, 8, swap, copy_backend_kind::cuda); });
  step_answer v3 = sa;
  v3.load_blocks = {{1, 2}, {}};
  put("step_v3", [&](auto& b) { encode_step_reply(b, 9, v3, copy_backend_kind::modelled); });
  stats_answer st;
  st.engines = 2;
  st.requests = 5;
  for (int i = 0; i < verb_count; ++i)
    st.calls[i] = i * 3;
  st.errors[1] = 4;
  st.controller.device_used = 9;
  st.controller.copies_in_flight = 2;
  st.storage.stored = 7;
  st.storage.backend = "file";
  st.now_ns = 5;
  put("stats", [&](auto& b) { encode_stats_reply(b, 10, st); });
  std::string e = encode_error(11, "bad_request", "request 5 in 'admits' is not waiting \xff");
  got["error"] = hex(e.data(), e.size());
  struct hello_in {
    uint32_t version;
    bool gpu, verify;
  };
  for (hello_in h : {hello_in{1, false, false}, hello_in{2, true, true}, hello_in{3, true, false},
                     hello_in{3, false, false}}) {
    hello_answer a{h.version, h.gpu, h.gpu && h.verify, session::device_owner::engine, 3, 64, 32,
                   1024, 4096, {"device", "host", "storage"}, 123456789, 1.5,
                   {"0.1.0", "abc1234", "Release", "GNU 12.2.0", "none"}};
    std::string name = "hello_v" + std::to_string(h.version) + (h.gpu ? "_gpu" : "");
    put(name.c_str(), [&](auto& b) { encode_hello_reply(b, 12, a); });
  }
  put("ping", [](auto& b) { encode_ping_reply(b, 13, 555); });
  put("bye", [](auto& b) { encode_bye_reply(b, 14, 3); });
  std::vector<gpu::block_pattern> targets = {{5, 0x62656e6368000000}, {9, 0x62656e6368000001}};
  put("bench_swap",
      [&](auto& b) { encode_bench_swap_reply(b, 15, {1 << 20, {20.5, 21.25}, 1, 32, targets}); });
  put("attach", [](auto& b) { encode_attach_reply(b, 16, {32, 4096, 1ull << 21, false}); });
  return got;
}

std::map<std::string, std::string> call_bytes() {
  std::map<std::string, std::string> got;
  std::string token = "sekrit";
  std::vector<cache_block> blocks = {{11, 64}, {1ull << 63, 10}};
  got["c_hello"] = call_hex(verb::hello, 1, token, 0, [](call& c) {
    c.versions = {1};
    c.name = "engine-sim";
    c.model = pin_model();
    c.block_size = 64;
  });
  got["c_hello_tensors"] = call_hex(verb::hello, 1, "", 0, [](call& c) {
    c.versions = {3};
    c.name = "engine-sim";
    c.model = pin_model();
    c.block_size = 64;
    c.tensors = pin_tensors();
  });
  got["c_hello_mla"] = call_hex(verb::hello, 1, "", 0, [](call& c) {
    c.versions = {3};
    c.name = "engine-sim";
    c.model = {"deepseek-v3", 61, 1, 128, "bf16"};
    c.model.latent_dim = 576;
    c.model.kv_lora_rank = 512;
    c.model.rope_head_dim = 64;
    c.block_size = 64;
  });
  got["c_lookup"] = call_hex(verb::lookup, 2, token, 3, [&](call& c) {
    c.text.kind = prompt::form::blocks;
    c.text.blocks = blocks;
  });
  got["c_allocate"] = call_hex(verb::allocate, 3, token, 3, [&](call& c) {
    c.req = 17;
    c.text.kind = prompt::form::blocks;
    c.text.blocks = blocks;
  });
  got["c_wait"] = call_hex(verb::wait, 4, "", 3, [](call& c) { c.req = 17; });
  got["c_probe"] = call_hex(verb::probe, 5, "", 3, [](call& c) {
    c.probe = {5, {1, 2}, 7, {9}};
  });
  got["c_step"] = call_hex(verb::step, 6, "", 3, [](call& c) { c.step = pin_step(false); });
  got["c_step_v3"] = call_hex(verb::step, 6, "", 3, [](call& c) { c.step = pin_step(true); });
  got["c_ping"] = call_hex(verb::ping, 7, "", 3, [](call&) {});
  got["c_stats"] = call_hex(verb::stats, 8, "", 3, [](call&) {});
  got["c_bye"] = call_hex(verb::bye, 9, "", 3, [](call&) {});
  got["c_bench_swap"] = call_hex(verb::bench_swap, 10, "", 3, [](call& c) {
    c.blocks = 64;
    c.repeats = 5;
  });
  got["c_attach_shm"] = call_hex(verb::attach, 11, "", 0, [](call& c) {
    c.model = pin_model();
    c.block_size = 64;
    c.tensors.present = true;
    c.tensors.memory = tensor_memory::shm;
    c.tensors.device_blocks = 100;
    c.tensors.layer_segments = {"/kv", "/kv"};
    c.tensors.layer_offsets = {0, 1 << 20};
    c.tensors.half_stride = 1 << 17;
    c.tensors.block_stride = 1 << 18;
    c.tensors.event_slots = 2;
    c.tensors.signals = "/sig";
  });
  return got;
}

}  // namespace

// The pins are the bytes the encoders wrote before serve/ was split into wire, server and
// client (the server's replies and the C++ client stub's calls); a change to one is a change of
// the protocol (docs/protocol.md), which the Python client and other engines read.
TEST_CASE("the wire bytes of every reply and of the client stub's calls are pinned",
          "[serve][codec]") {
  std::map<std::string, std::string> want = pins();
  std::map<std::string, std::string> got = reply_bytes();
  for (auto& [name, bytes] : call_bytes())
    got[name] = bytes;
  // A deliberate protocol change rewrites the pins: KVTIER_WRITE_PINS=1, then review the diff.
  if (const char* w = std::getenv("KVTIER_WRITE_PINS"); w && std::string(w) == "1") {
    std::string path = std::string(KVTIER_SOURCE_DIR) + "/tests/serve/data/wire_pins.txt";
    std::vector<std::string> order;  // the file's order, new pins last
    {
      std::ifstream in(path);
      std::string name, bytes;
      while (in >> name >> bytes)
        order.push_back(name);
    }
    std::ofstream out(path);
    for (const std::string& name : order)
      if (got.count(name))
        out << name << ' ' << got[name] << '\n';
    for (const auto& [name, bytes] : got)
      if (!want.count(name))
        out << name << ' ' << bytes << '\n';
    return;
  }
  CHECK(got.size() == want.size());
  for (const auto& [name, bytes] : want) {
    INFO(name);
    REQUIRE(got.count(name));
    CHECK(got[name] == bytes);
  }
}
