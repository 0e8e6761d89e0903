// The same engine traffic against a server with one controller stack for every engine and one with
// a stack per engine (serve.controller_stacks; docs/design.md, "Controller stacks"). Hits are equal
// wherever an engine finds only blocks it computed itself; a block another engine computed is a
// hit under one stack and a miss under per_engine, where only storage is shared (off here, so
// that no modelled store's timing decides a hit). Also: a restarted engine's stack, /metrics and
// stats summed over the stacks, version 3 engines in both layouts, the workers' count. The file's
// seven cases run in about 0.5 s.

#include <catch2/catch.hpp>

#include <sched.h>

#include <array>

#include <httplib.h>

#include "serve/server/server_plan.hpp"
#include "tests/serve/serve_calls.hpp"

using namespace kvtier::test::serve_calls;
using kvtier::test::serve_process;

namespace {

constexpr int engine_count = 4;
constexpr size_t prompt_tokens = 256;  // 4 full blocks
constexpr int shared_prompt = 1000;    // the seed of the prompt every engine asks for

// A prompt of `prompt_tokens` tokens, one per seed.
std::vector<int32_t> tokens_of(int seed) {
  return kvtier::test::serve_calls::prompt(prompt_tokens, seed);
}

// What a request found: its lookup's hits, then its admission's, in blocks per tier.
struct request_hits {
  uint64_t lookup_device = 0, lookup_host = 0, lookup_storage = 0;
  uint64_t device = 0, host = 0, storage = 0;
  bool operator==(const request_hits& o) const {
    return lookup_device == o.lookup_device && lookup_host == o.lookup_host &&
           lookup_storage == o.lookup_storage && device == o.device && host == o.host &&
           storage == o.storage;
  }
  uint64_t total() const { return lookup_device + lookup_host + device + host + storage; }
};

struct engine_run {
  std::unique_ptr<client> c;
  uint64_t step = 1;
  uint64_t req = 1;
  std::vector<request_hits> hits;
};

// One request's life as an engine runs it: lookup, allocate, a step admitting it, one computing
// it, finish.
request_hits run_request(engine_run& e, const std::vector<int32_t>& t) {
  request_hits h;
  reply l = e.c->call("lookup", 1, [&](map_writer& w) { w.put("tokens", t); });
  h.lookup_device = l.u64("device_blocks");
  h.lookup_host = l.u64("host_blocks");
  h.lookup_storage = l.u64("storage_blocks");
  uint64_t req = e.req++;
  allocate_ready(*e.c, req, t);
  reply g = step_admit(*e.c, e.step++, req, static_cast<uint32_t>(t.size()));
  REQUIRE(admitted(g));
  const msgpack::object& a = first_admit(g);
  h.device = reply::u64_in(a, "device_blocks");
  h.host = reply::u64_in(a, "host_blocks");
  h.storage = reply::u64_in(a, "storage_blocks");
  step_marks(*e.c, e.step++, "computed", req, static_cast<uint32_t>(t.size()));
  e.c->call("finish", 1, [&](map_writer& w) { w.put("req", req); });
  ++e.step;  // finish took the next step number
  return h;
}

struct run_result {
  std::array<std::vector<request_hits>, engine_count> hits;
  uint64_t host_blocks_offered = 0;  // hello's host_blocks: the engine's stack's share
  uint64_t device_used = 0;
  uint64_t violations = 0;
};

// Engines take turns, one request each per round: round r asks engine e for the prompt
// `prompt_of(e, r)`.
run_result run_traffic(const std::string& stacks, int rounds, int (*prompt_of)(int, int)) {
  serve_process s({"--set", "cache.device_tokens=4096", "--set", "cache.host_tokens=8192", "--set",
                   "storage.capacity_tokens=0", "--set", "serve.controller_stacks=" + stacks,
                   "--set", "serve.engine_slots=4"});
  std::array<engine_run, engine_count> engines;
  run_result out;
  for (int e = 0; e < engine_count; ++e) {
    engines[e].c = std::make_unique<client>(s.endpoint());
    reply h = engines[e].c->hello("engine-" + std::to_string(e), shape(32, "bf16"), 64);
    out.host_blocks_offered = h.u64("host_blocks");
  }
  for (int r = 0; r < rounds; ++r)
    for (int e = 0; e < engine_count; ++e)
      out.hits[e].push_back(run_request(engines[e], tokens_of(prompt_of(e, r))));
  reply st = engines[0].c->call("stats");
  CHECK(st.u64("engines") == engine_count);
  out.device_used = stat_of(st, "controller", "device_used");
  out.violations = stat_of(st, "controller", "invariant_violations");
  CHECK(s.stop() == 0);
  return out;
}

// Two prompts of each engine's own, alternating.
int private_prompt(int engine, int round) { return 10 * (engine + 1) + round % 2; }
// The shared prompt, then the engine's own, alternating.
int mixed_prompt(int engine, int round) {
  return round % 2 == 0 ? shared_prompt : private_prompt(engine, 0);
}

}  // namespace

TEST_CASE("per-engine controller stacks find what one stack finds of an engine's own blocks",
          "[serve][stacks]") {
  run_result one = run_traffic("one", 4, private_prompt);
  run_result per_engine = run_traffic("per_engine", 4, private_prompt);
  CHECK(one.host_blocks_offered == 128);
  CHECK(per_engine.host_blocks_offered == 32);  // an equal share of the host tier each
  for (int e = 0; e < engine_count; ++e) {
    INFO("engine " << e);
    REQUIRE(one.hits[e].size() == per_engine.hits[e].size());
    for (size_t r = 0; r < one.hits[e].size(); ++r) {
      INFO("round " << r);
      CHECK(one.hits[e][r] == per_engine.hits[e][r]);
    }
    CHECK(one.hits[e][2].total() > 0);  // the repeats hit: the comparison is not of misses
  }
  // `stats` sums the stacks: each engine's blocks were on one device or the other.
  CHECK(per_engine.device_used == one.device_used);
  CHECK(one.violations == 0);
  CHECK(per_engine.violations == 0);
}

TEST_CASE("per-engine controller stacks lose exactly the hits on other engines' blocks",
          "[serve][stacks]") {
  run_result one = run_traffic("one", 4, mixed_prompt);
  run_result per_engine = run_traffic("per_engine", 4, mixed_prompt);
  for (int e = 0; e < engine_count; ++e) {
    INFO("engine " << e);
    for (size_t r = 0; r < one.hits[e].size(); ++r) {
      INFO("round " << r);
      // Round 0 of engines 1-3: the shared prompt, which engine 0 computed in that round. One
      // stack finds its blocks; a stack of the engine's own has never held them.
      if (r == 0 && e > 0) {
        CHECK(one.hits[e][r].total() > 0);
        CHECK(per_engine.hits[e][r].total() == 0);
      } else {
        CHECK(one.hits[e][r] == per_engine.hits[e][r]);
      }
    }
  }
  // The shared prompt's 4 blocks are held once by one stack, by every engine's stack under
  // per_engine.
  CHECK(per_engine.device_used == one.device_used + (engine_count - 1) * 4);
  CHECK(per_engine.violations == 0);
}

TEST_CASE("serve.controller_stacks=per_engine refuses what it cannot serve", "[serve][stacks]") {
  // 4 host blocks cannot be split 8 ways: refused at start (exit 2), naming both keys.
  REQUIRE_THROWS_WITH(serve_process({"--set", "cache.host_tokens=256", "--set",
                                     "serve.controller_stacks=per_engine", "--set",
                                     "serve.engine_slots=8"}),
                      Catch::Contains("exited 2") && Catch::Contains("serve.engine_slots") &&
                        Catch::Contains("cache.host_tokens"));
  REQUIRE_THROWS_WITH(serve_process({"--set", "serve.controller_stacks=two"}),
                      Catch::Contains("serve.controller_stacks"));
}

TEST_CASE("a restarted engine takes the controller stack it left, and finds its blocks there",
          "[serve][stacks]") {
  serve_process s({"--set", "cache.device_tokens=4096", "--set", "cache.host_tokens=8192", "--set",
                   "storage.capacity_tokens=0", "--set", "serve.controller_stacks=per_engine",
                   "--set", "serve.engine_slots=2"});
  auto connect = [&](const std::string& name) {
    engine_run e;
    e.c = std::make_unique<client>(s.endpoint());
    e.c->hello(name, shape(32, "bf16"), 64);
    return e;
  };
  auto looked_up = [](engine_run& e, const std::vector<int32_t>& t) {
    reply l = e.c->call("lookup", 1, [&](map_writer& w) { w.put("tokens", t); });
    return l.u64("device_blocks") + l.u64("host_blocks");
  };
  auto of_a = tokens_of(1), of_b = tokens_of(2);
  {
    engine_run a = connect("a"), b = connect("b");  // stacks 0 and 1
    run_request(a, of_a);
    run_request(b, of_b);
    a.c->call("bye");
    b.c->call("bye");
  }
  // Both stacks are free: "b" comes back first, and takes stack 1 (its own), not stack 0.
  engine_run b = connect("b");
  CHECK(looked_up(b, of_b) == 4);
  CHECK(looked_up(b, of_a) == 0);
  engine_run a = connect("a");
  CHECK(looked_up(a, of_a) == 4);
  CHECK(looked_up(a, of_b) == 0);
  CHECK(s.stop() == 0);
}

namespace {

// A sample of the metrics text, as Prometheus writes it: `name{labels} value`.
double metric(const std::string& text, const std::string& series) {
  size_t at = text.find("\n" + series + " ");
  REQUIRE(at != std::string::npos);
  return std::stod(text.substr(at + series.size() + 2));
}

}  // namespace

TEST_CASE("/metrics sums the controller stacks", "[serve][stacks]") {
  serve_process s({"--set", "cache.device_tokens=4096", "--set", "cache.host_tokens=8192", "--set",
                   "storage.capacity_tokens=0", "--set", "serve.controller_stacks=per_engine",
                   "--set", "serve.engine_slots=4", "--metrics-port", "0"});
  // The metrics line follows the "listening" line the start waited for.
  const std::string marker = "metrics on http://127.0.0.1:";
  std::string said = s.output();
  for (int i = 0; i < 200 && said.find(marker) == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    said = s.output();
  }
  size_t at = said.find(marker);
  REQUIRE(at != std::string::npos);
  int port = std::stoi(said.substr(at + marker.size()));
  std::array<engine_run, 2> engines;
  for (int e = 0; e < 2; ++e) {
    engines[e].c = std::make_unique<client>(s.endpoint());
    engines[e].c->hello("engine-" + std::to_string(e), shape(32, "bf16"), 64);
    run_request(engines[e], tokens_of(e + 1));
  }
  reply st = engines[0].c->call("stats");
  httplib::Client http("127.0.0.1", port);
  auto got = http.Get("/metrics");
  REQUIRE(got);
  const std::string& text = got->body;
  CHECK(metric(text, "kvtier_tier_capacity_blocks{tier=\"device\"}") == 4 * 64);  // 64 each
  CHECK(metric(text, "kvtier_tier_capacity_blocks{tier=\"host\"}") == 4 * 32);  // 128 split 4 ways
  // Each engine's 4 blocks on its own stack's device, as stats sums them too.
  CHECK(metric(text, "kvtier_tier_used_blocks{tier=\"device\"}") == 8);
  CHECK(stat_of(st, "controller", "device_used") == 8);
  CHECK(metric(text, "kvtier_scrape_report_errors") == 0);
  CHECK(s.stop() == 0);
}

namespace {

// A version 3 engine's request: admitted into the device blocks `ids` the engine chose, computed,
// finished; the admission's reply.
reply run_owned(client& c, uint64_t& step, uint64_t req, const std::vector<int32_t>& t,
                const std::vector<uint32_t>& ids) {
  allocate_ready(c, req, t);
  reply g = c.call("step", 2, [&](map_writer& w) {
    w.put("step", step++);
    auto& pk = w.key("admits");
    pk.pack_array(1);
    pk.pack_array(3);
    pk.pack(req);
    pk.pack(static_cast<uint32_t>(t.size()));
    pk.pack(ids);
  });
  step_marks(c, step++, "computed", req, static_cast<uint32_t>(t.size()));
  c.call("finish", 1, [&](map_writer& w) { w.put("req", req); });
  ++step;
  return g;
}

}  // namespace

// Version 3 (docs/protocol.md, "The engine-owned device tier"): each engine names blocks of its
// own GPU, and lookups offer host copies after the engine's own prefix. Once engine a evicts its
// blocks, their host copies are a's hits in both layouts, and b's only under one stack.
TEST_CASE("version 3 engines keep their own device blocks and share host copies under one stack "
          "only", "[serve][stacks]") {
  for (const std::string stacks : {"one", "per_engine"}) {
    INFO(stacks);
    serve_process s({"--set", "cache.device_tokens=1024", "--set", "cache.host_tokens=4096",
                     "--set", "storage.capacity_tokens=0", "--set",
                     "cache.write_policy=write_through", "--set",
                     "serve.controller_stacks=" + stacks, "--set", "serve.engine_slots=2"});
    client a(s.endpoint()), b(s.endpoint());
    a.hello_version("a", shape(32, "bf16"), 64, 3);
    b.hello_version("b", shape(32, "bf16"), 64, 3);
    uint64_t step_a = 1, step_b = 1;
    std::vector<uint32_t> ids = {0, 1, 2, 3};  // each engine's own GPU: the same ids
    auto of_a = tokens_of(1);
    CHECK(admitted(run_owned(a, step_a, 1, of_a, ids)));
    CHECK(admitted(run_owned(b, step_b, 1, tokens_of(2), ids)));
    CHECK(stat_of(a.call("stats"), "controller", "device_used") == 8);
    a.call("step", 2, [&](map_writer& w) {
      w.put("step", step_a++);
      w.put("evicted", ids);
    });
    auto host_hits = [&](client& c) {
      reply l = c.call("lookup", 2, [&](map_writer& w) {
        w.put("tokens", of_a);
        w.put("computed_tokens", 0);
      });
      return l.u64("host_blocks");
    };
    CHECK(host_hits(a) == 4);
    CHECK(host_hits(b) == (stacks == "one" ? 4 : 0));
    CHECK(stat_of(a.call("stats"), "controller", "invariant_violations") == 0);
    CHECK(s.stop() == 0);
  }
}

TEST_CASE("a per-engine server's workers leave a core to the socket and I/O threads",
          "[serve][stacks]") {
  server_plan p;
  p.deployment.instances.resize(8);
  CHECK(worker_threads(p) == 1);  // one stack: one worker, whatever the cores
  p.stacks = controller_stacks::per_engine;
  cpu_set_t before;
  REQUIRE(sched_getaffinity(0, sizeof(before), &before) == 0);
  std::vector<int> cores;
  for (int c = 0; c < CPU_SETSIZE && cores.size() < 3; ++c)
    if (CPU_ISSET(c, &before))
      cores.push_back(c);
  // Pinned to 1, 2 and 3 cores (as far as this machine has them): 1, 1 and 2 workers.
  for (size_t n = 1; n <= cores.size(); ++n) {
    cpu_set_t narrowed;
    CPU_ZERO(&narrowed);
    for (size_t i = 0; i < n; ++i)
      CPU_SET(cores[i], &narrowed);
    REQUIRE(sched_setaffinity(0, sizeof(narrowed), &narrowed) == 0);
    CHECK(worker_threads(p) == std::max<size_t>(n, 2) - 1);
  }
  REQUIRE(sched_setaffinity(0, sizeof(before), &before) == 0);
  p.deployment.instances.resize(1);  // never more workers than stacks and the server actor
  CHECK(worker_threads(p) <= 2);
}
