// The wire format's calls (serve/wire/): every call the client stub encodes and the server
// decodes, round-tripped through msgpack, empty and large lists included, with the replies of
// the session verbs (hello, ping, bye, bench_swap, attach) and the error replies.

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
#include "tests/serve/call_compare.hpp"
#include "tests/serve/codec_round_trip.hpp"

using namespace kvtier;
using namespace kvtier::serve;
using kvtier::serve::test::check_same;
using kvtier::serve::test::round_trip;

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
