// kvtier serve as an engine meets it: each test starts its own server on a free loopback port
// (serve_process.hpp) and stops it with SIGTERM, which must exit 0. A request's life, refusals
// (bad messages, tokens, hello) and disconnects; the shared calls are in serve_calls.hpp.

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <thread>

#include "tests/serve/serve_calls.hpp"
#include "tests/serve/serve_process.hpp"

namespace fs = std::filesystem;
using namespace kvtier;
using namespace kvtier::serve;
using namespace kvtier::test::serve_calls;
using kvtier::test::serve_process;

TEST_CASE("a request's life through the protocol", "[serve]") {
  serve_process s(small());
  client c(s.endpoint());
  reply h = c.call("hello", 4, [](map_writer& w) {
    w.key("versions").pack(std::vector<uint32_t>{1, 7});
    w.put_str("name", "e");
    w.put("block_size", 64);
    put_default_model(w);
  });
  CHECK(h.u64("version") == 1);
  CHECK(h.u64("device_blocks") == 16);
  CHECK(h.u64("host_blocks") == 64);
  const msgpack::object* build = h.find("kvtier");  // the server's build (docs/protocol.md)
  REQUIRE(build);
  CHECK(reply::find_in(*build, "version")->as<std::string>() == this_build().version);
  CHECK(reply::find_in(*build, "commit")->as<std::string>() == this_build().commit);
  c.set_engine(h.u64("engine"));
  auto t = prompt(256, 1);  // 4 full blocks
  reply l = c.call("lookup", 1, [&](map_writer& w) { w.put("tokens", t); });
  CHECK(l.u64("device_blocks") == 0);
  CHECK(l.u64("storage_blocks") == 0);
  reply a = allocate_ready(c, 1, t);
  CHECK(a.u64("available_blocks") == 16);
  CHECK(a.u64("prefetched_blocks") == 0);
  reply p = c.call("probe", 2, [](map_writer& w) {
    w.put("step", 1);
    w.put("candidates", std::vector<uint64_t>{1});
  });
  CHECK(p.u64("available_blocks") == 16);
  reply g = step_admit(c, 1, 1, 256);
  CHECK(admitted(g));
  CHECK(reply::u64_in(first_admit(g), "req") == 1);
  CHECK(g.u64("available_blocks") == 12);
  step_marks(c, 2, "computed", 1, 256);
  reply f = c.call("finish", 1, [](map_writer& w) { w.put("req", 1); });
  CHECK(f.u64("step") == 3);  // one counter: the step after step 2
  // The computed blocks stay cached: a second request finds them on the device.
  l = c.call("lookup", 1, [&](map_writer& w) { w.put("tokens", t); });
  CHECK(l.u64("device_blocks") == 4);
  CHECK(l.u64("device_tokens") == 256);
  // The same blocks named by the hashes an engine computes (docs/protocol.md).
  std::vector<cache_block> blocks;
  map_token_blocks(t.data(), t.size(), 64, blocks);
  std::vector<uint64_t> hashes;
  for (auto& b : blocks)
    hashes.push_back(b.hash);
  l = c.call("lookup", 1, [&](map_writer& w) { w.put("hashes", hashes); });
  CHECK(l.u64("device_blocks") == 4);
  reply a2 = c.call("allocate", 2, [&](map_writer& w) {
    w.put("req", 2);
    w.put("hashes", hashes);
  });
  if (a2.str("state") == "pending")
    c.call("wait", 1, [](map_writer& w) { w.put("req", 2); });
  g = step_admit(c, 4, 2, 256);
  CHECK(admitted(g));
  CHECK(reply::u64_in(first_admit(g), "device_blocks") == 4);
  // Calls that do not fit the request's state are refused, naming it; the server goes on.
  uint64_t id = c.send("commit", 2, [](map_writer& w) {
    w.put("req", 77);
    w.put("tokens", 64);
  });
  CHECK_THAT(error_of(c, id), Catch::Contains("bad_request") && Catch::Contains("request 77"));
  allocate_ready(c, 3, prompt(64, 3));
  id = c.send("step", 2, [](map_writer& w) {
    w.put("step", 5);
    w.key("grows").pack(std::vector<std::vector<uint64_t>>{{3, 64}});
  });
  CHECK_THAT(error_of(c, id), Catch::Contains("request 3 in 'grows' is not running"));
  id = c.send("allocate", 2, with_tokens(3, prompt(64, 3)));
  CHECK_THAT(error_of(c, id), Catch::Contains("already allocated"));
  reply st = c.call("stats");
  CHECK(st.u64("engines") == 1);
  CHECK(st.u64("requests") == 2);
  CHECK(stat_of(st, "errors", "bad_request") == 3);
  CHECK(stat_of(st, "calls", "step") >= 3);
  CHECK(stat_of(st, "controller", "invariant_violations") == 0);
  CHECK(s.stop() == 0);
}

TEST_CASE("bad messages get an error reply and the server goes on", "[serve]") {
  serve_process s(small({"--set", "serve.max_message_bytes=1024"}));
  client c(s.endpoint());
  CHECK_THAT(raw_error(c, "\xc1 not msgpack"), Catch::StartsWith("malformed: not a msgpack"));
  CHECK_THAT(raw_error(c, "\x93\x01\x02\x03"), Catch::Contains("must be a msgpack map"));
  CHECK_THAT(raw_error(c, std::string(2000, '\x01')), Catch::StartsWith("too_large")
                                                     && Catch::Contains("2000 bytes"));
  // a map that claims more entries than the frame holds
  CHECK_THAT(raw_error(c, "\xdf\xff\xff\xff\xff"), Catch::StartsWith("malformed"));
  uint64_t id = c.send("fly", 0);
  CHECK_THAT(error_of(c, id), Catch::Contains("unknown_op: unknown op 'fly'"));
  id = c.send("lookup", 1, [](map_writer& w) { w.put("hashes", std::vector<uint64_t>{1}); });
  CHECK_THAT(error_of(c, id), Catch::Contains("'lookup' needs 'engine'"));
  id = c.send("lookup", 2, [](map_writer& w) {
    w.put("engine", 99);
    w.put("hashes", std::vector<uint64_t>{1});
  });
  CHECK_THAT(error_of(c, id), Catch::Contains("not_registered: engine 99"));
  hello(c);
  id = c.send("lookup", 1, [](map_writer& w) { w.put_str("hashes", "abc"); });
  CHECK_THAT(error_of(c, id), Catch::Contains("'hashes' must be an array"));
  id = c.send("lookup", 1, [](map_writer& w) {
    w.key("tokens").pack(std::vector<int64_t>{1, -5, int64_t{1} << 40});
  });
  CHECK_THAT(error_of(c, id), Catch::Contains("beyond int32"));
  id = c.send("allocate", 1, [](map_writer& w) {
    w.key("blocks").pack(std::vector<std::vector<uint64_t>>{{1, 64}});
  });
  CHECK_THAT(error_of(c, id), Catch::Contains("'allocate' needs 'req'"));
  reply p = c.call("ping");
  CHECK(p.u64("now_ns") > 0);
  reply st = c.call("stats");
  CHECK(stat_of(st, "errors", "too_large") == 1);
  CHECK(stat_of(st, "errors", "malformed") >= 5);
  CHECK(stat_of(st, "errors", "unknown_op") == 1);
  CHECK(s.stop(SIGINT) == 0);  // Ctrl-C stops it as cleanly as SIGTERM
}

TEST_CASE("a wrong token is refused and counted, a public bind needs one", "[serve]") {
  serve_process s(small({"--token", "s3cret"}));
  {
    client none(s.endpoint());
    uint64_t id = none.send("ping", 0);
    CHECK_THAT(error_of(none, id), Catch::Contains("unauthorized: this server needs a 'token'"));
    client wrong(s.endpoint(), "guess");
    id = wrong.send("ping", 0);
    CHECK_THAT(error_of(wrong, id), Catch::Contains("unauthorized: wrong token"));
  }
  client right(s.endpoint(), "s3cret");
  hello(right);
  reply st = right.call("stats");
  CHECK(stat_of(st, "errors", "unauthorized") == 2);
  CHECK(s.stop() == 0);
  int port = kvtier::test::free_loopback_port();
  std::string cmd = std::string(KVTIER_BINARY) + " serve --bind tcp://0.0.0.0:" +
                    std::to_string(port) + " 2>&1";
  FILE* out = popen(cmd.c_str(), "r");
  REQUIRE(out);
  char buf[512] = {};
  size_t n = fread(buf, 1, sizeof(buf) - 1, out);
  int status = pclose(out);
  CHECK(WEXITSTATUS(status) == 2);
  CHECK_THAT(std::string(buf, n), Catch::Contains("give --token"));
  // seeded faults belong to virtual-time replays
  cmd = std::string(KVTIER_BINARY) + " serve --bind tcp://127.0.0.1:" + std::to_string(port) +
        " --set faults.get_fail_probability=0.5 2>&1";
  out = popen(cmd.c_str(), "r");
  REQUIRE(out);
  n = fread(buf, 1, sizeof(buf) - 1, out);
  status = pclose(out);
  CHECK(WEXITSTATUS(status) == 2);
  CHECK_THAT(std::string(buf, n), Catch::Contains("faults.*"));
}

TEST_CASE("hello: a version mismatch and engines of another model shape are refused", "[serve]") {
  serve_process s(small());
  client a(s.endpoint());
  hello(a);
  client v(s.endpoint());
  uint64_t id = v.send("hello", 4, [](map_writer& w) {
    w.key("versions").pack(std::vector<uint32_t>{4, 5});
    w.put_str("name", "future");
    w.put("block_size", 64);
    put_default_model(w);
  });
  CHECK_THAT(error_of(v, id), Catch::Contains("version: no common protocol version"));
  client b(s.endpoint());
  try {
    hello(b, 16);
    FAIL("a 16-layer engine was registered beside a 32-layer server");
  } catch (const remote_error& e) {
    CHECK(e.kind == "model_mismatch");
    CHECK_THAT(e.what(), Catch::Contains("model.layers is 16, the server's is 32"));
  }
  try {
    hello(b, 32, "fp8");
    FAIL("an fp8 engine was registered beside a bf16 server");
  } catch (const remote_error& e) {
    CHECK_THAT(e.what(), Catch::Contains("model.kv_dtype"));
  }
  try {
    b.hello("x", shape(32, "bf16"), 16);
    FAIL("an engine of another block size was registered");
  } catch (const remote_error& e) {
    CHECK_THAT(e.what(), Catch::Contains("block_size is 16"));
  }
  // The first engine is untouched.
  reply r = allocate_ready(a, 1, prompt(128, 1));
  CHECK(r.u64("prefetched_blocks") == 0);
  CHECK(a.call("stats").u64("engines") == 1);
  CHECK(s.stop() == 0);
}

TEST_CASE("hello: an MLA engine's latent is checked against the server's, naming the key",
          "[serve]") {
  // DeepSeek-V3's latent: 512 + 64 elements a layer caches per token, one "K" only.
  serve_process s(small({"--set", "model.kv_lora_rank=512", "--set", "model.rope_head_dim=64"}));
  auto mla = [](uint32_t rank, uint32_t rope) {
    model_shape m = shape(32, "bf16");
    m.kv_heads = 1;  // vLLM's view of an MLA cache: one head of the latent's size
    m.head_dim = rank + rope;
    m.kv_lora_rank = rank;
    m.rope_head_dim = rope;
    m.latent_dim = rank + rope;
    return m;
  };
  auto refused = [&](const model_shape& m) -> std::string {
    client c(s.endpoint());
    try {
      c.hello("mla", m, 64);
    } catch (const remote_error& e) {
      CHECK(e.kind == "model_mismatch");
      return e.what();
    }
    return "registered";
  };
  client ok(s.endpoint());
  CHECK(ok.hello("mla", mla(512, 64), 64).u64("device_blocks") == 16);
  CHECK_THAT(refused(mla(448, 64)),
             Catch::Contains("model.kv_lora_rank is 448, the server's is 512"));
  CHECK_THAT(refused(mla(512, 128)),
             Catch::Contains("model.rope_head_dim is 128, the server's is 64"));
  // An engine that sends the latent alone is checked on the latent, the server's parts named.
  model_shape bare = mla(448, 64);
  bare.kv_lora_rank = bare.rope_head_dim = 0;
  CHECK_THAT(refused(bare), Catch::Contains("model.latent_dim is 512, the server's is 576 = "
                                            "model.kv_lora_rank 512 + model.rope_head_dim 64"));
  CHECK_THAT(refused(shape(32, "bf16")),
             Catch::Contains("model.latent_dim is 0, the server's is 576"));
  // engine-sim says hello with its config's latent: another rope part exits 2, naming the key.
  std::string cmd = std::string(KVTIER_BINARY) + " engine-sim --quiet --connect " + s.endpoint() +
                    " --set model.kv_lora_rank=512 --set model.rope_head_dim=32 2>&1";
  FILE* out = popen(cmd.c_str(), "r");
  REQUIRE(out);
  char buf[1024] = {};
  size_t n = fread(buf, 1, sizeof(buf) - 1, out);
  CHECK(WEXITSTATUS(pclose(out)) == 2);
  CHECK_THAT(std::string(buf, n), Catch::Contains("model.rope_head_dim is 32, the server's is 64"));
  CHECK(s.stop() == 0);
  // And an MLA engine at a server of K and V heads.
  serve_process gqa(small());
  client c(gqa.endpoint());
  try {
    c.hello("mla", mla(512, 64), 64);
    FAIL("an MLA engine was registered beside a server of K and V heads");
  } catch (const remote_error& e) {
    CHECK_THAT(e.what(), Catch::Contains("model.latent_dim is 576, the server's is 0, not an MLA"));
  }
  CHECK(gqa.stop() == 0);
}

TEST_CASE("hello: a config the engine does not share with the server is refused, naming the key",
          "[serve]") {
  serve_process s(small());
  auto hello_with = [&](std::vector<std::pair<std::string, std::string>> config) {
    client c(s.endpoint());
    c.share_config(std::move(config));
    c.hello("engine", shape(32, "bf16"), 64);
    return c.engine();
  };
  // The server's own values pass: tier sizes compare as the blocks they resolve to.
  CHECK(hello_with({{"cache.device_blocks", "16"}, {"cache.eviction", "\"lru\""},
                    {"links.h2d_gbps", "55.0"}}) > 0);
  try {
    hello_with({{"cache.device_blocks", "16"}, {"cache.host_blocks", "8"}});
    FAIL("an engine with another host tier was registered");
  } catch (const remote_error& e) {
    CHECK(e.kind == "config_mismatch");
    CHECK_THAT(e.what(), Catch::Contains("cache.host_blocks is 8 at the engine, the server's "
                                         "is 64"));
  }
  try {
    hello_with({{"trace.time_scale", "8"}});
    FAIL("a key the server does not share was taken");
  } catch (const remote_error& e) {
    CHECK(e.kind == "bad_request");
    CHECK_THAT(e.what(), Catch::Contains("'trace.time_scale'"));
  }
  client c(s.endpoint());
  CHECK(stat_of(c.call("stats"), "errors", "config_mismatch") == 1);
  // engine-sim sends its config: a different device tier is refused at once, exit 2, naming it.
  std::string cmd = std::string(KVTIER_BINARY) + " engine-sim --quiet --connect " + s.endpoint()
                    + " --set cache.device_tokens=4096 2>&1";
  auto t0 = std::chrono::steady_clock::now();
  FILE* out = popen(cmd.c_str(), "r");
  REQUIRE(out);
  char buf[1024] = {};
  size_t n = fread(buf, 1, sizeof(buf) - 1, out);
  int status = pclose(out);
  CHECK(WEXITSTATUS(status) == 2);
  CHECK_THAT(std::string(buf, n), Catch::Contains("config_mismatch: cache.device_blocks is 64"));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));
  CHECK(s.stop() == 0);
}

TEST_CASE("a client that disconnects mid-request has its blocks released after the timeout",
          "[serve]") {
  serve_process s(small({"--set", "serve.client_timeout_s=1.5"}));
  {
    client a(s.endpoint());
    hello(a);
    allocate_ready(a, 1, prompt(1024, 1));  // every device block
    CHECK(admitted(step_admit(a, 1, 1, 1024)));
    allocate_ready(a, 2, prompt(64, 2));  // waiting, never admitted
  }  // gone without a bye
  client b(s.endpoint());
  hello(b);
  allocate_ready(b, 1, prompt(1024, 3));
  CHECK_FALSE(admitted(step_admit(b, 1, 1, 1024)));  // a still holds the device
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (b.call("stats").u64("engines") > 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    b.call("ping");
  }
  reply st = b.call("stats");
  CHECK(st.u64("engines") == 1);
  CHECK(st.u64("requests") == 1);  // b's own
  CHECK(admitted(step_admit(b, 2, 1, 1024)));
  b.call("finish", 1, [](map_writer& w) { w.put("req", 1); });
  st = b.call("stats");
  CHECK(st.u64("requests") == 0);
  CHECK(stat_of(st, "controller", "invariant_violations") == 0);
  CHECK(s.stop() == 0);
}

TEST_CASE("serve.io_threads: the engines' connections are served by that many ZeroMQ I/O threads",
          "[serve]") {
  std::vector<std::string> args = small();
  args.insert(args.end(), {"--set", "serve.io_threads=3"});
  serve_process s(args);
  std::vector<std::unique_ptr<client>> engines;
  for (int e = 0; e < 3; ++e) {
    engines.push_back(std::make_unique<client>(s.endpoint()));
    reply h = engines.back()->call("hello", 4, [&](map_writer& w) {
      w.key("versions").pack(std::vector<uint32_t>{1});
      w.put_str("name", "e" + std::to_string(e));
      w.put("block_size", 64);
      put_default_model(w);
    });
    CHECK(h.u64("version") == 1);
  }
  int io = 0;  // libzmq names its I/O threads ZMQbg/IO/<n>
  for (const auto& task : std::filesystem::directory_iterator(
         "/proc/" + std::to_string(s.pid()) + "/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    io += name.rfind("ZMQbg/IO/", 0) == 0;
  }
  CHECK(io == 3);
  REQUIRE_THROWS_WITH(serve_process({"--set", "serve.io_threads=0"}),
                      Catch::Contains("exited 2") && Catch::Contains("serve.io_threads"));
}
