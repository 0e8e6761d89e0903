// Lookups answered off the server actor (serve/server/off_actor_lookups.hpp): the published blocks never
// report a block whose removal was applied before the lookup began, and a server answering
// lookups off the actor answers what one answering them on the actor does, while engines evict.

#include <atomic>
#include <thread>

#include <catch2/catch.hpp>

#include "serve/client/client.hpp"
#include "serve/server/off_actor_lookups.hpp"
#include "serve/server/prompt_blocks.hpp"
#include "serve/server/published_blocks.hpp"
#include "tests/serve/serve_process.hpp"

using namespace kvtier;
using namespace kvtier::serve;

namespace {

// Block i of generation g: a chain of its own per generation.
block_hash block_of(uint64_t g, uint64_t i) { return (g << 20) | (i + 1); }

std::vector<cache_block> chain_of(uint64_t g, uint32_t n) {
  std::vector<cache_block> out;
  for (uint32_t i = 0; i < n; ++i)
    out.push_back({block_of(g, i), 64});
  return out;
}

}  // namespace

TEST_CASE("published blocks: device hits, then host hits, up to the first miss",
          "[serve][off_actor]") {
  published_blocks p;
  auto c = chain_of(1, 5);
  for (int i = 0; i < 2; ++i)
    p.stored(tier::device, c[i].hash, std::nullopt, 64);
  p.stored(tier::host, c[1].hash, std::nullopt, 64);
  p.stored(tier::host, c[2].hash, std::nullopt, 64);
  p.stored(tier::device, c[4].hash, std::nullopt, 64);  // after a miss: not matched
  CHECK(p.match(c.data(), c.size()).device_blocks == 0);  // published when the batch ends
  p.batch_end();
  prefix_hit h = p.match(c.data(), c.size());
  CHECK(h.device_blocks == 2);
  CHECK(h.host_blocks == 1);
  CHECK(h.device_tokens == 128);
  CHECK(h.host_tokens == 64);
  p.removed(tier::device, c[0].hash);  // no device copy of block 0: block 0 is not a device hit
  p.batch_end();
  h = p.match(c.data(), c.size());
  CHECK(h.device_blocks == 0);
  CHECK(h.host_blocks == 0);  // block 0 has no copy left at all
  p.stored(tier::host, c[0].hash, std::nullopt, 64);
  p.batch_end();
  h = p.match(c.data(), c.size());
  CHECK(h.device_blocks == 0);
  CHECK(h.host_blocks == 1);  // block 1 holds a device copy: no host hit, as the tree's match
  p.cleared();
  p.batch_end();
  CHECK(p.match(c.data(), c.size()).host_blocks == 0);
}

TEST_CASE("published blocks: a lookup never sees a block removed by a batch that ended before it "
          "began, while the actor goes on", "[serve][off_actor]") {
  published_blocks p;
  constexpr uint32_t n = 64;
  constexpr uint64_t generations = 3000;
  std::atomic<uint64_t> gone{0};  // every generation up to this one is removed, its batch ended
  std::atomic<bool> done{false};
  std::atomic<uint64_t> stale{0}, lookups{0};
  // The actor's thread: each generation is computed (device), backed up (host), evicted from the
  // device, then from the host, leaf first, each step one batch, as the controller does it.
  std::thread actor([&] {
    for (uint64_t g = 1; g <= generations; ++g) {
      auto c = chain_of(g, n);
      for (auto& b : c)
        p.stored(tier::device, b.hash, std::nullopt, 64);
      for (auto& b : c)
        p.stored(tier::host, b.hash, std::nullopt, 64);
      p.batch_end();
      for (uint32_t i = n; i-- > 0;)
        p.removed(tier::device, c[i].hash);
      p.batch_end();
      for (uint32_t i = n; i-- > 0;)
        p.removed(tier::host, c[i].hash);
      p.batch_end();
      gone.store(g, std::memory_order_release);
    }
    done = true;
  });
  // The socket thread, the one reader.
  std::thread reader([&] {
    while (!done) {
      uint64_t g = gone.load(std::memory_order_acquire);
      if (g == 0)
        continue;
      auto dead = chain_of(g, n);
      prefix_hit h = p.match(dead.data(), dead.size());
      stale += h.device_blocks + h.host_blocks;
      auto live = chain_of(g + 1, n);  // being written meanwhile: all or nothing per tier
      prefix_hit l = p.match(live.data(), live.size());
      if (l.device_blocks + l.host_blocks != 0 && l.device_blocks + l.host_blocks != n)
        ++stale;
      ++lookups;
    }
  });
  actor.join();
  reader.join();
  CHECK(lookups > 0);
  CHECK(stale == 0);
}

namespace {

inbound_call lookup_call(uint64_t conn, uint64_t engine, const std::vector<cache_block>& blocks,
                         const std::string& token = {}) {
  msgpack::sbuffer buf;
  write_call(buf, "lookup", 7, token, engine, 1, [&](map_writer& w) { put_blocks(w, blocks); });
  return read_call(conn, buf.data(), buf.size(), 1u << 24, std::chrono::steady_clock::now());
}

}  // namespace

TEST_CASE("a lookup is answered off the actor only for its engine's connection, without storage "
          "to ask, at versions 1 and 2", "[serve][off_actor]") {
  auto named = chain_of(1, 4);  // the engine's hashes; the index holds the server's names
  std::vector<cache_block> server_names = named;
  for (auto& b : server_names)
    b.tokens = 64;
  {
    prompt p;
    p.kind = prompt::form::blocks;
    p.blocks = named;
    server_names.clear();
    REQUIRE_FALSE(prompt_blocks(p, 64, 1000, server_names));
  }
  for (bool storage : {false, true}) {
    off_actor_lookups o({"", 64, 1000, storage}, 1, nullptr);
    for (int i = 0; i < 3; ++i)
      o.sink(0)->stored(tier::device, server_names[static_cast<size_t>(i)].hash, std::nullopt, 64);
    o.sink(0)->batch_end();
    answered_lookup rec;
    CHECK_FALSE(o.try_answer(lookup_call(5, 1, named), rec));  // engine 1 not registered
    o.engine_registered(1, 5, 2, 0);
    CHECK_FALSE(o.try_answer(lookup_call(6, 1, named), rec));  // another connection
    auto three = std::vector<cache_block>(named.begin(), named.begin() + 3);
    std::optional<std::string> r = o.try_answer(lookup_call(5, 1, three), rec);
    REQUIRE(r);
    CHECK(rec.device_blocks == 3);
    CHECK(rec.prompt_blocks == 3);
    // The fourth block misses: with a storage pool, storage must be asked (the actor does).
    CHECK(o.try_answer(lookup_call(5, 1, named), rec).has_value() == !storage);
    o.engine_registered(2, 5, 3, 0);  // version 3 reads the engine's computed prefix: the actor's
    CHECK_FALSE(o.try_answer(lookup_call(5, 2, three), rec));
    o.engine_dropped(1);
    CHECK_FALSE(o.try_answer(lookup_call(5, 1, three), rec));
  }
  off_actor_lookups guarded({"secret", 64, 1000, false}, 1, nullptr);
  guarded.engine_registered(1, 5, 1, 0);
  answered_lookup rec;
  CHECK_FALSE(guarded.try_answer(lookup_call(5, 1, named, "wrong"), rec));
  CHECK(guarded.try_answer(lookup_call(5, 1, named, "secret"), rec));
}

TEST_CASE("with a controller stack per engine, a lookup matches its engine's stack's blocks only",
          "[serve][off_actor]") {
  auto named = chain_of(2, 3);
  std::vector<cache_block> server_names;
  prompt p;
  p.kind = prompt::form::blocks;
  p.blocks = named;
  REQUIRE_FALSE(prompt_blocks(p, 64, 1000, server_names));
  off_actor_lookups o({"", 64, 1000, false}, 2, nullptr);
  for (const cache_block& b : server_names)
    o.sink(1)->stored(tier::host, b.hash, std::nullopt, 64);
  o.sink(1)->batch_end();
  o.engine_registered(1, 5, 1, 0);  // stack 0 holds nothing
  o.engine_registered(2, 6, 1, 1);
  answered_lookup rec;
  REQUIRE(o.try_answer(lookup_call(5, 1, named), rec));
  CHECK(rec.host_blocks == 0);
  REQUIRE(o.try_answer(lookup_call(6, 2, named), rec));
  CHECK(rec.host_blocks == 3);
}

namespace {

std::vector<int32_t> tokens_of(size_t n, int32_t seed) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i)
    t[i] = static_cast<int32_t>(seed * 100003 + i);
  return t;
}

model_shape llama() {
  model_shape m;
  m.name = "llama3-8b";
  m.layers = 32;
  m.kv_heads = 8;
  m.head_dim = 128;
  m.kv_dtype = "bf16";
  return m;
}

// One request of `t`, run to the end: allocated, admitted, computed, finished.
void run_request(client& c, uint64_t req, uint64_t& step, const std::vector<int32_t>& t) {
  reply a = c.call("allocate", 2, [&](map_writer& w) {
    w.put("req", req);
    w.put("tokens", t);
  });
  if (a.str("state") == "pending")
    c.call("wait", 1, [&](map_writer& w) { w.put("req", req); });
  auto marks = [&](const char* key) {
    return [&, key](map_writer& w) {
      w.put("step", ++step);
      auto& pk = w.key(key);
      pk.pack_array(1);
      pk.pack_array(2);
      pk.pack(req);
      pk.pack(static_cast<uint32_t>(t.size()));
    };
  };
  reply g = c.call("step", 2, marks("admits"));
  const msgpack::object* list = g.find("admits");
  REQUIRE(list);
  if (reply::find_in(list->via.array.ptr[0], "admitted")->via.boolean)
    c.call("step", 2, marks("computed"));
  c.call("step", 2, [&](map_writer& w) {
    w.put("step", ++step);
    w.put("finished", std::vector<uint64_t>{req});
  });
}

struct lookup_figures {
  uint64_t device = 0, host = 0;
};

lookup_figures look_up(client& c, const std::vector<int32_t>& t) {
  reply l = c.call("lookup", 1, [&](map_writer& w) { w.put("tokens", t); });
  return {l.u64("device_blocks"), l.u64("host_blocks")};
}

// The figures one engine's lookups of `probe` get after each request of another engine, while a
// third connection looks up all the time (its answers: never more blocks than the prompt has).
std::vector<lookup_figures> evicting_run(const std::string& lookups, uint64_t& off_actor_calls) {
  kvtier::test::serve_process s({"--set", "cache.device_tokens=1024", "--set",
                                 "cache.host_tokens=2048", "--set", "storage.capacity_tokens=0",
                                 "--set", "serve.lookups=" + lookups});
  client worker(s.endpoint()), prober(s.endpoint());
  worker.hello("worker", llama(), 64);
  prober.hello("prober", llama(), 64);
  auto probe = tokens_of(256, 1);  // 4 blocks
  std::atomic<bool> done{false};
  std::atomic<uint64_t> bad{0};
  std::thread hammer([&] {
    client h(s.endpoint());
    h.hello("hammer", llama(), 64);
    while (!done) {
      lookup_figures f = look_up(h, probe);
      if (f.device + f.host > 4)
        ++bad;
    }
  });
  std::vector<lookup_figures> seen;
  uint64_t step = 0;
  run_request(worker, 1, step, probe);
  seen.push_back(look_up(prober, probe));
  // Requests of other prompts push the probe's blocks to the host, then out of the host.
  for (uint64_t r = 2; r < 14; ++r) {
    run_request(worker, r, step, tokens_of(512, static_cast<int32_t>(r)));
    seen.push_back(look_up(prober, probe));
  }
  done = true;
  hammer.join();
  CHECK(bad == 0);
  reply st = prober.call("stats");
  off_actor_calls = reply::u64_in(*st.find("calls"), "lookup");
  CHECK(s.stop() == 0);
  return seen;
}

}  // namespace

TEST_CASE("lookups off the actor answer as the actor does while another engine evicts",
          "[serve][off_actor]") {
  uint64_t published_calls = 0, actor_calls = 0;
  std::vector<lookup_figures> published = evicting_run("published", published_calls);
  std::vector<lookup_figures> actor = evicting_run("actor", actor_calls);
  REQUIRE(published.size() == actor.size());
  for (size_t i = 0; i < published.size(); ++i) {
    INFO("after request " << i + 1);
    CHECK(published[i].device == actor[i].device);
    CHECK(published[i].host == actor[i].host);
  }
  // The run does evict: the probe went from the device to the host, then out of both.
  CHECK(actor.front().device == 4);
  CHECK(actor.back().device + actor.back().host == 0);
  bool host_seen = false;
  for (auto& f : actor)
    host_seen = host_seen || f.host > 0;
  CHECK(host_seen);
  // Lookups answered off the actor are counted as every call is.
  CHECK(published_calls > 13);
}
