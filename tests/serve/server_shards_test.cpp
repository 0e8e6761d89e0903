// The server's shards (docs/design.md, "Controller stacks"): one server actor per controller
// stack, engines placed on stacks by the engine_directory at hello, their calls routed by
// connection. The directory's rules by themselves, then engines calling side by side on a
// per-engine server, each answered by its own stack only.

#include <catch2/catch.hpp>

#include <array>
#include <string>
#include <thread>
#include <vector>

#include "serve/server/engine_directory.hpp"
#include "tests/serve/serve_calls.hpp"

using namespace kvtier::test::serve_calls;
using kvtier::serve::engine_directory;
using kvtier::test::serve_process;

TEST_CASE("the engine directory places one engine per stack, restarted engines where they were",
          "[serve][stacks]") {
  engine_directory d(3);
  // New engines take the least used stack, the first of those.
  CHECK(d.place(10, "a") == 0);
  CHECK(d.place(11, "b") == 1);
  // A second engine on a connection joins its stack, whatever the others serve.
  CHECK(d.place(10, "a2") == 0);
  CHECK(d.engines_on(0) == 2);
  // A refused hello gives its place back: the next engine still finds stack 2 free.
  CHECK(d.place(12, "refused") == 2);
  d.cancel(2, 12);
  CHECK(d.engines_on(2) == 0);
  CHECK(d.place(13, "c") == 2);
  // A stack left free goes to the next new engine, whoever left it.
  d.leave(1, 11, "b");
  CHECK(d.place(14, "d") == 1);
  // With stacks 1 and 2 both free, "c" comes back to the one it left, not the first free.
  d.leave(1, 14, "d");
  d.leave(2, 13, "c");
  CHECK(d.place(15, "c") == 2);
  // A shard that decoded a hello itself counts the engine on its own stack.
  CHECK(d.join(2, 15) == 2);
  CHECK(d.engines_on(2) == 2);
  d.leave(0, 10, "a");
  d.leave(0, 10, "a2");
  CHECK(d.engines_on(0) == 0);
}

namespace {

constexpr int engine_count = 6;
constexpr int rounds = 6;
constexpr size_t prompt_tokens = 256;  // 4 full blocks

// One engine's requests, from its own thread: no Catch assertion here (not thread-safe); the
// hits of each lookup and admission, and the first failure, for the test to check after.
struct engine_calls {
  std::vector<uint64_t> lookup_hits, admit_hits;
  std::string failure;
};

void run_engine(const std::string& endpoint, int index, engine_calls& out) {
  try {
    client c(endpoint);
    c.hello("engine-" + std::to_string(index), shape(32, "bf16"), 64);
    uint64_t step = 1;
    for (int r = 0; r < rounds; ++r) {
      // Every engine asks for the same three prompts: under one stack they would share blocks.
      std::vector<int32_t> t = prompt(prompt_tokens, 1 + r % 3);
      reply l = c.call("lookup", 1, [&](map_writer& w) { w.put("tokens", t); });
      out.lookup_hits.push_back(l.u64("device_blocks") + l.u64("host_blocks"));
      uint64_t req = static_cast<uint64_t>(r) + 1;
      reply a = c.call("allocate", 2, with_tokens(req, t));
      if (a.str("state") != "ready")
        throw std::runtime_error("allocate answered " + a.str("state"));
      reply g = step_admit(c, step++, req, static_cast<uint32_t>(t.size()));
      const msgpack::object* admits = g.find("admits");
      if (!admits || admits->type != msgpack::type::ARRAY || admits->via.array.size != 1)
        throw std::runtime_error("a step admitting one request answered no admission");
      const msgpack::object& admit = admits->via.array.ptr[0];
      out.admit_hits.push_back(reply::u64_in(admit, "device_blocks") +
                               reply::u64_in(admit, "host_blocks"));
      step_marks(c, step++, "computed", req, static_cast<uint32_t>(t.size()));
      c.call("finish", 1, [&](map_writer& w) { w.put("req", req); });
      ++step;
    }
  } catch (const std::exception& e) {
    out.failure = e.what();
  }
}

}  // namespace

TEST_CASE("engines calling side by side on a per-engine server are each answered by their own "
          "stack", "[serve][stacks]") {
  // Device room for every prompt (no eviction), one host block per stack, storage off: what
  // an engine finds depends on its own calls only, however the shards interleave.
  serve_process s({"--set", "cache.device_tokens=4096", "--set",
                   "cache.host_tokens=" + std::to_string(64 * engine_count), "--set",
                   "storage.capacity_tokens=0", "--set", "serve.controller_stacks=per_engine",
                   "--set", "serve.engine_slots=" + std::to_string(engine_count)});
  std::array<engine_calls, engine_count> calls;
  std::vector<std::thread> threads;
  for (int e = 0; e < engine_count; ++e)
    threads.emplace_back(run_engine, s.endpoint(), e, std::ref(calls[e]));
  for (std::thread& t : threads)
    t.join();
  // Each engine misses each prompt once, then holds it: no engine ever finds another's blocks,
  // which a call answered by another engine's shard would show (or refuse as unregistered).
  const std::vector<uint64_t> expected = {0, 0, 0, 4, 4, 4};
  for (int e = 0; e < engine_count; ++e) {
    INFO("engine " << e);
    CHECK(calls[e].failure.empty());
    CHECK(calls[e].lookup_hits == expected);
    CHECK(calls[e].admit_hits == expected);
  }
  // stats sums every shard's counters and every stack's report.
  client c(s.endpoint());
  reply st = c.call("stats");
  CHECK(st.u64("engines") == engine_count);
  CHECK(stat_of(st, "calls", "hello") == engine_count);
  CHECK(stat_of(st, "calls", "lookup") == engine_count * rounds);
  CHECK(stat_of(st, "calls", "finish") == engine_count * rounds);
  CHECK(stat_of(st, "controller", "invariant_violations") == 0);
  // Each stack keeps its engine's three prompts, 4 blocks each.
  CHECK(stat_of(st, "controller", "device_used") == engine_count * 3 * 4);
  CHECK(s.stop() == 0);
}

TEST_CASE("a shard answers its connection's bad frames with errors and serves on", "[serve][stacks]") {
  // Frames of a connection placed by its hello are decoded by its stack's shard, not the socket
  // thread: the same errors as serve_test.cpp's, from there.
  serve_process s({"--set", "cache.host_tokens=8192", "--set", "serve.controller_stacks=per_engine",
                   "--set", "serve.engine_slots=2", "--set", "serve.max_message_bytes=4096"});
  client c(s.endpoint());
  hello(c);
  CHECK_THAT(raw_error(c, "\xc1 not msgpack"), Catch::StartsWith("malformed: not a msgpack"));
  CHECK_THAT(raw_error(c, "\x93\x01\x02\x03"), Catch::Contains("must be a msgpack map"));
  CHECK_THAT(raw_error(c, "\xdf\xff\xff\xff\xff"), Catch::StartsWith("malformed"));
  CHECK_THAT(raw_error(c, std::string(5000, '\x01')), Catch::StartsWith("too_large"));
  uint64_t id = c.send("fly", 0);
  CHECK_THAT(error_of(c, id), Catch::Contains("unknown_op: unknown op 'fly'"));
  id = c.send("lookup", 1, [](map_writer& w) { w.put_str("hashes", "abc"); });
  CHECK_THAT(error_of(c, id), Catch::Contains("'hashes' must be an array"));
  // A second hello on the connection, decoded by the shard: refused for its model (its place
  // given back), then registered beside the first on the same stack.
  CHECK_THROWS_WITH(c.hello("other", shape(16, "bf16"), 64), Catch::Contains("model.layers"));
  c.hello("second", shape(32, "bf16"), 64);
  auto t = prompt(256, 7);
  reply l = c.call("lookup", 1, [&](map_writer& w) { w.put("tokens", t); });
  CHECK(l.u64("device_blocks") == 0);
  reply st = c.call("stats");
  CHECK(st.u64("engines") == 2);
  CHECK(stat_of(st, "errors", "too_large") == 1);
  CHECK(stat_of(st, "errors", "malformed") >= 4);
  CHECK(stat_of(st, "errors", "unknown_op") == 1);
  CHECK(stat_of(st, "errors", "model_mismatch") == 1);
  CHECK(stat_of(st, "controller", "invariant_violations") == 0);
  CHECK(s.stop() == 0);
}
