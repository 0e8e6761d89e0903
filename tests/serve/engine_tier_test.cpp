// Protocol version 3, the engine-owned device tier (docs/protocol.md): the engine names the
// device blocks each request got, lookup counts hits after the engine's own prefix in host
// memory and storage only, and each admission's `load_blocks` are the engine's blocks kvtier
// loads into.

#include <algorithm>
#include <chrono>
#include <thread>

#include <catch2/catch.hpp>

#include "serve/client/client.hpp"
#include "serve/client/engine_block_allocator.hpp"
#include "serve/wire/map_writer.hpp"
#include "tests/serve/serve_process.hpp"

using namespace kvtier;
using namespace kvtier::serve;
using kvtier::test::serve_process;

namespace {

model_shape llama() {
  model_shape m;
  m.name = "llama3-8b";
  m.layers = 32;
  m.kv_heads = 8;
  m.head_dim = 128;
  m.kv_dtype = "bf16";
  return m;
}

std::vector<int32_t> prompt(size_t n, int32_t seed) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i)
    t[i] = static_cast<int32_t>(seed * 100003 + i);
  return t;
}

void allocate_ready(client& c, uint64_t req, const std::vector<int32_t>& t) {
  reply a = c.call("allocate", 2, [&](map_writer& w) {
    w.put("req", req);
    w.put("tokens", t);
  });
  if (a.str("state") != "ready")
    c.call("wait", 1, [req](map_writer& w) { w.put("req", req); });
}

// One `step` with one entry in `key`: [req, tokens] or, with ids, [req, tokens, ids].
uint64_t send_step(client& c, uint64_t step, const char* key, uint64_t req, uint32_t tokens,
                   const std::vector<uint32_t>* ids = nullptr) {
  return c.send("step", 2, [&](map_writer& w) {
    w.put("step", step);
    auto& pk = w.key(key);
    pk.pack_array(1);
    pk.pack_array(ids ? 3 : 2);
    pk.pack(req);
    pk.pack(tokens);
    if (ids)
      pk.pack(*ids);
  });
}

std::string error_of(client& c, uint64_t id) {
  reply r = c.receive(id);
  REQUIRE_FALSE(r.flag("ok"));
  return r.str("error") + ": " + r.str("message");
}

std::vector<uint32_t> load_blocks(const reply& r) {
  const msgpack::object* admits = r.find("admits");
  REQUIRE(admits);
  REQUIRE(admits->via.array.size == 1);
  const msgpack::object* ids = reply::find_in(admits->via.array.ptr[0], "load_blocks");
  REQUIRE(ids);
  return ids->as<std::vector<uint32_t>>();
}

reply lookup(client& c, const std::vector<int32_t>& t, uint32_t computed_tokens) {
  return c.call("lookup", 2, [&](map_writer& w) {
    w.put("tokens", t);
    w.put("computed_tokens", computed_tokens);
  });
}

}  // namespace

TEST_CASE("version 3: kvtier loads host hits into the device blocks the engine named",
          "[serve]") {
  // 16 device blocks of 64 tokens; write-through keeps a host copy of every computed block.
  serve_process s({"--set", "cache.device_tokens=1024", "--set", "cache.host_tokens=4096",
                   "--set", "cache.write_policy=write_through"});
  client c(s.endpoint());
  reply h = c.hello_version("engine", llama(), 64, 3);
  CHECK(h.u64("version") == 3);
  CHECK(h.str("device_owner") == "engine");
  std::vector<int32_t> p1 = prompt(256, 1);  // four blocks
  allocate_ready(c, 1, p1);
  std::vector<uint32_t> first = {10, 11, 12, 13};
  reply r = c.receive(send_step(c, 1, "admits", 1, 256, &first));
  REQUIRE(r.flag("ok"));
  CHECK(load_blocks(r).empty());  // nothing held yet
  REQUIRE(c.receive(send_step(c, 2, "computed", 1, 256)).flag("ok"));
  REQUIRE(c.call("finish", 1, [](map_writer& w) { w.put("req", uint64_t{1}); }).flag("ok"));
  // A prompt of the whole device pool pushes the first out of kvtier's model of the device.
  std::vector<uint32_t> all(16);
  for (uint32_t i = 0; i < 16; ++i)
    all[i] = i;
  allocate_ready(c, 2, prompt(1024, 2));
  REQUIRE(c.receive(send_step(c, 4, "admits", 2, 1024, &all)).flag("ok"));
  REQUIRE(c.receive(send_step(c, 5, "computed", 2, 1024)).flag("ok"));
  REQUIRE(c.call("finish", 1, [](map_writer& w) { w.put("req", uint64_t{2}); }).flag("ok"));
  // lookup: the engine has none of it, then two blocks of it; kvtier offers the rest from host.
  reply l = lookup(c, p1, 0);
  CHECK(l.u64("device_blocks") == 0);
  CHECK(l.u64("host_blocks") == 4);
  CHECK(l.u64("host_tokens") == 256);
  l = lookup(c, p1, 128);
  CHECK(l.u64("host_blocks") == 2);
  CHECK(l.u64("host_tokens") == 128);
  CHECK(lookup(c, p1, 256).u64("host_blocks") == 0);
  // Admitted with the engine's blocks: kvtier loads its host hits into exactly those.
  allocate_ready(c, 3, p1);
  std::vector<uint32_t> second = {5, 7, 6, 9};
  r = c.receive(send_step(c, 7, "admits", 3, 256, &second));
  REQUIRE(r.flag("ok"));
  CHECK(load_blocks(r) == second);
  // Growth names the new blocks only.
  std::vector<uint32_t> more = {2};
  REQUIRE(c.receive(send_step(c, 8, "grows", 3, 300, &more)).flag("ok"));
  CHECK_THAT(error_of(c, send_step(c, 9, "grows", 3, 400, &more)),
             Catch::Contains("gives 1 new device block ids: it holds 5 and 400 tokens need 2"));
  // Tables that do not fit are refused, naming the request.
  allocate_ready(c, 4, prompt(128, 4));
  CHECK_THAT(error_of(c, send_step(c, 10, "admits", 4, 128)),
             Catch::Contains("request 4 in 'admits' gives 0 device block ids for 128 tokens"));
  std::vector<uint32_t> beyond = {3, 99};
  CHECK_THAT(error_of(c, send_step(c, 11, "admits", 4, 128, &beyond)),
             Catch::Contains("names device block 99, beyond the engine's 16 blocks"));
  CHECK(c.call("stats").find("controller"));
  CHECK(s.stop() == 0);
}

TEST_CASE("device block ids need version 3, older engines are served as before", "[serve]") {
  serve_process s({"--set", "cache.device_tokens=1024", "--set", "cache.host_tokens=4096"});
  client c(s.endpoint());
  reply h = c.hello("engine", llama(), 64);
  CHECK(h.u64("version") == 1);
  CHECK_FALSE(h.find("device_owner"));
  allocate_ready(c, 1, prompt(128, 1));
  std::vector<uint32_t> ids = {0, 1};
  CHECK_THAT(error_of(c, send_step(c, 1, "admits", 1, 128, &ids)),
             Catch::Contains("need protocol version 3"));
  reply r = c.receive(send_step(c, 2, "admits", 1, 128));
  REQUIRE(r.flag("ok"));
  CHECK_FALSE(reply::find_in(r.find("admits")->via.array.ptr[0], "load_blocks"));
  CHECK(s.stop() == 0);
}

TEST_CASE("engine-sim's device allocator shares prefixes and keeps released blocks cached",
          "[serve]") {
  engine_block_allocator a(6, 4);
  std::vector<cache_block> p = {{11, 4}, {12, 4}, {13, 2}};
  auto first = a.admit(1, p, 10);
  REQUIRE(first);
  CHECK(first->size() == 3);
  // The same prefix shares its blocks, the partial one the trace names too (as kvtier's model
  // of a trace's blocks does).
  auto second = a.admit(2, p, 10);
  REQUIRE(second);
  CHECK(*second == *first);
  CHECK_FALSE(a.admit(3, {{21, 4}, {22, 4}}, 16));  // 4 blocks wanted, 3 left: nothing taken
  CHECK(a.table(3).empty());
  a.release(1);
  a.release(2);
  // Cached after release: found again; evicted (least recently released first) when needed.
  auto again = a.admit(4, p, 8);
  REQUIRE(again);
  CHECK(*again == std::vector<uint32_t>(first->begin(), first->begin() + 2));
  auto other = a.admit(5, {{31, 4}, {32, 4}, {33, 4}, {34, 4}}, 16);
  REQUIRE(other);  // the failed admission's blocks went back free, not cached
  CHECK_FALSE(a.grow(5, 20));
  CHECK(a.table(5).size() == 4);
}

namespace {

// A step that only reports the engine's evicted blocks.
uint64_t send_evicted(client& c, uint64_t step, const std::vector<uint32_t>& ids) {
  return c.send("step", 2, [&](map_writer& w) {
    w.put("step", step);
    w.put("evicted", ids);
  });
}

uint64_t controller_stat(client& c, const char* key) {
  reply s = c.call("stats");
  const msgpack::object* v = reply::find_in(*s.find("controller"), key);
  REQUIRE(v);
  return v->as<uint64_t>();
}

// Until the controller's copies have landed (the backups a computed block starts), so that what
// follows does not race them.
void wait_copies(client& c) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (controller_stat(c, "copies_in_flight") > 0) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// Prompt `t` admitted into `ids`, computed and finished, from step `step` on (three steps).
void run_through(client& c, uint64_t req, const std::vector<int32_t>& t,
                 const std::vector<uint32_t>& ids, uint64_t step) {
  allocate_ready(c, req, t);
  REQUIRE(c.receive(send_step(c, step, "admits", req, static_cast<uint32_t>(t.size()), &ids))
            .flag("ok"));
  REQUIRE(c.receive(send_step(c, step + 1, "computed", req, static_cast<uint32_t>(t.size())))
            .flag("ok"));
  REQUIRE(c.call("finish", 1, [req](map_writer& w) { w.put("req", req); }).flag("ok"));
}

}  // namespace

TEST_CASE("version 3: a block the engine evicted leaves kvtier's device, its host copy stays",
          "[serve]") {
  serve_process s({"--set", "cache.device_tokens=1024", "--set", "cache.host_tokens=4096",
                   "--set", "cache.write_policy=write_through"});
  client c(s.endpoint());
  c.hello_version("engine", llama(), 64, 3);
  std::vector<int32_t> p1 = prompt(256, 1);
  run_through(c, 1, p1, {10, 11, 12, 13}, 1);
  // kvtier models all four on the engine's device: after its two-block prefix it offers nothing.
  CHECK(lookup(c, p1, 128).u64("host_blocks") == 0);
  // The engine drops the last two: kvtier offers their host copies after the engine's prefix.
  REQUIRE(c.receive(send_evicted(c, 4, {12, 13})).flag("ok"));
  reply l = lookup(c, p1, 128);
  CHECK(l.u64("host_blocks") == 2);
  CHECK(l.u64("host_tokens") == 128);
  CHECK(lookup(c, p1, 0).u64("host_blocks") == 0);  // its first two are still the engine's
  // Admitted again with the engine's two cached blocks: kvtier loads the other two.
  allocate_ready(c, 2, p1);
  std::vector<uint32_t> again = {10, 11, 4, 5};
  reply r = c.receive(send_step(c, 5, "admits", 2, 256, &again));
  REQUIRE(r.flag("ok"));
  CHECK(load_blocks(r) == std::vector<uint32_t>{4, 5});
  CHECK(s.stop() == 0);
}

// (No ';' in a test's name: catch_discover_tests would cut the name there and run nothing.)
TEST_CASE("version 3: nothing is saved from a block the engine evicted, held blocks stay",
          "[serve]") {
  // write_back: a block leaving kvtier's device is copied to host memory, from its device block.
  serve_process s({"--set", "cache.device_tokens=1024", "--set", "cache.host_tokens=4096",
                   "--set", "cache.write_policy=write_back"});
  client c(s.endpoint());
  c.hello_version("engine", llama(), 64, 3);
  std::vector<int32_t> p1 = prompt(256, 1);
  run_through(c, 1, p1, {10, 11, 12, 13}, 1);
  wait_copies(c);
  REQUIRE(c.receive(send_evicted(c, 4, {10, 11, 12, 13})).flag("ok"));
  // A prompt of the whole pool: kvtier's model would write p1's blocks back; they are gone.
  std::vector<uint32_t> all(16);
  for (uint32_t i = 0; i < 16; ++i)
    all[i] = i;
  allocate_ready(c, 2, prompt(1024, 2));
  REQUIRE(c.receive(send_step(c, 5, "admits", 2, 1024, &all)).flag("ok"));
  CHECK(controller_stat(c, "write_backs") == 0);
  CHECK(lookup(c, p1, 0).u64("host_blocks") == 0);
  // A running request's block cannot have gone; ids beyond the pool are refused.
  CHECK_THAT(error_of(c, send_evicted(c, 6, {3})),
             Catch::Contains("names device block 3, which request 2 still holds"));
  CHECK_THAT(error_of(c, send_evicted(c, 7, {16})), Catch::Contains("beyond the engine's 16"));
  CHECK(s.stop() == 0);
}

TEST_CASE("'evicted' needs version 3", "[serve]") {
  serve_process s({"--set", "cache.device_tokens=1024", "--set", "cache.host_tokens=4096"});
  client c(s.endpoint());
  c.hello("engine", llama(), 64);
  CHECK_THAT(error_of(c, send_evicted(c, 1, {0})), Catch::Contains("needs protocol version 3"));
  CHECK(s.stop() == 0);
}

TEST_CASE("engine-sim's device allocator tells which blocks' contents went", "[serve]") {
  engine_block_allocator a(4, 4);
  std::vector<cache_block> p = {{11, 4}, {12, 4}, {13, 2}};
  REQUIRE(a.admit(1, p, 10));
  std::vector<uint32_t> first = a.table(1);
  CHECK(a.take_evicted().empty());
  a.release(1);  // every block the prompt names stays cached
  CHECK(a.take_evicted().empty());
  // One named block and one past its prompt: the free block, then the least recently released
  // cached one, the first prompt's tail (a request's blocks are released tail first).
  REQUIRE(a.admit(2, {{21, 4}}, 8));
  CHECK(a.take_evicted() == std::vector<uint32_t>{first[2]});
  CHECK(a.table(2)[1] == first[2]);
  a.release(2);  // the block past its prompt is nobody's to find again: its contents go
  CHECK(a.take_evicted() == std::vector<uint32_t>{first[2]});
  CHECK(a.take_evicted().empty());
}
