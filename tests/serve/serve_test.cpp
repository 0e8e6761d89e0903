// kvtier serve as an engine meets it: each test starts its own server on a free loopback port
// (serve_process.hpp) and stops it with SIGTERM, which must exit 0.

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/block_hash.hpp"
#include "core/build_info.hpp"
#include "serve/block_names.hpp"
#include "gpu/device_info.hpp"
#include "serve/client.hpp"
#include "tests/serve/serve_process.hpp"

namespace fs = std::filesystem;
using namespace kvtier;
using namespace kvtier::serve;
using kvtier::test::serve_process;

namespace {

// A small instance: 16 device blocks, 64 host blocks, storage on (the modelled pool).
std::vector<std::string> small(std::vector<std::string> more = {}) {
  std::vector<std::string> args = {"--set", "cache.device_tokens=1024", "--set",
                                   "cache.host_tokens=4096"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// Llama-3-8B's KV shape with `layers` layers of `dtype`.
model_shape shape(uint32_t layers, const std::string& dtype) {
  model_shape m;
  m.name = "llama3-8b";
  m.layers = layers;
  m.kv_heads = 8;
  m.head_dim = 128;
  m.kv_dtype = dtype;
  return m;
}

void hello(client& c, uint32_t layers = 32, const std::string& dtype = "bf16") {
  c.hello("test", shape(layers, dtype), 64);
}

// hello's `model`, written by hand where a test needs a hello the client's own would not send.
void put_default_model(map_writer& w) {
  w.key("model");
  auto& pk = w.packer();  // the nested map goes through the same packer
  pk.pack_map(5);
  pk.pack(std::string("name")); pk.pack(std::string("llama3-8b"));
  pk.pack(std::string("layers")); pk.pack(32);
  pk.pack(std::string("kv_heads")); pk.pack(8);
  pk.pack(std::string("head_dim")); pk.pack(128);
  pk.pack(std::string("kv_dtype")); pk.pack(std::string("bf16"));
}

std::vector<int32_t> prompt(size_t n, int32_t seed) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i)
    t[i] = static_cast<int32_t>(seed * 100003 + i);
  return t;
}

std::function<void(map_writer&)> with_tokens(uint64_t req, const std::vector<int32_t>& t) {
  return [req, t](map_writer& w) {
    w.put("req", req);
    w.put("tokens", t);
  };
}

// allocate, then wait when the answer is "pending" (storage is asked, or loads are under way).
reply allocate_ready(client& c, uint64_t req, const std::vector<int32_t>& t) {
  reply a = c.call("allocate", 2, with_tokens(req, t));
  if (a.str("state") == "ready")
    return a;
  CHECK(a.str("state") == "pending");
  return c.call("wait", 1, [req](map_writer& w) { w.put("req", req); });
}

reply step_admit(client& c, uint64_t step, uint64_t req, uint32_t tokens) {
  return c.call("step", 2, [&](map_writer& w) {
    w.put("step", step);
    auto& pk = w.key("admits");
    pk.pack_array(1);
    pk.pack_array(2);
    pk.pack(req);
    pk.pack(tokens);
  });
}

reply step_marks(client& c, uint64_t step, const char* key, uint64_t req, uint32_t tokens) {
  return c.call("step", 2, [&](map_writer& w) {
    w.put("step", step);
    auto& pk = w.key(key);
    pk.pack_array(1);
    pk.pack_array(2);
    pk.pack(req);
    pk.pack(tokens);
  });
}

const msgpack::object& first_admit(const reply& r) {
  const msgpack::object* a = r.find("admits");
  REQUIRE(a);
  REQUIRE(a->type == msgpack::type::ARRAY);
  REQUIRE(a->via.array.size == 1);
  return a->via.array.ptr[0];
}

bool admitted(const reply& r) {
  const msgpack::object* x = reply::find_in(first_admit(r), "admitted");
  return x && x->via.boolean;
}

std::string error_of(client& c, uint64_t id) {
  reply r = c.receive(id);
  REQUIRE_FALSE(r.flag("ok"));
  return r.str("error") + ": " + r.str("message");
}

uint64_t stat_of(const reply& stats, const char* group, const char* key) {
  const msgpack::object* g = stats.find(group);
  REQUIRE(g);
  return reply::u64_in(*g, key);
}

}  // namespace

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
  auto raw_error = [&](const std::string& bytes) {
    c.send_raw(bytes);
    auto r = c.next(std::chrono::seconds(10));
    REQUIRE(r);
    REQUIRE_FALSE(r->flag("ok"));
    return r->str("error") + ": " + r->str("message");
  };
  CHECK_THAT(raw_error("\xc1 not msgpack"), Catch::StartsWith("malformed: not a msgpack"));
  CHECK_THAT(raw_error("\x93\x01\x02\x03"), Catch::Contains("must be a msgpack map"));
  CHECK_THAT(raw_error(std::string(2000, '\x01')), Catch::StartsWith("too_large")
                                                     && Catch::Contains("2000 bytes"));
  // a map that claims more entries than the frame holds
  CHECK_THAT(raw_error("\xdf\xff\xff\xff\xff"), Catch::StartsWith("malformed"));
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

TEST_CASE("a wrong token is refused and counted; a public bind needs one", "[serve]") {
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

namespace {

// Runs one request of `t` through the server, computed and finished, then waits until storage
// holds `blocks` blocks.
void store_prompt(client& c, uint64_t req, const std::vector<int32_t>& t, uint64_t blocks) {
  allocate_ready(c, req, t);
  REQUIRE(admitted(step_admit(c, req * 10, req, static_cast<uint32_t>(t.size()))));
  step_marks(c, req * 10 + 1, "computed", req, static_cast<uint32_t>(t.size()));
  c.call("finish", 1, [&](map_writer& w) { w.put("req", req); });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (stat_of(c.call("stats"), "storage", "stored") < blocks
         && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(stat_of(c.call("stats"), "storage", "stored") == blocks);
}

std::string file_name_of(uint64_t hash) {
  char name[24];
  std::snprintf(name, sizeof(name), "%016llx.blk", static_cast<unsigned long long>(hash));
  return name;
}

}  // namespace

TEST_CASE("serve restarted on the file backend rebuilds its index and serves no lost block",
          "[serve]") {
  fs::path dir = fs::temp_directory_path() / ("kvtier-serve-file-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  std::vector<std::string> args = small({"--set", "storage.backend=file", "--set",
                                         "storage.file_dirs=[\"" + dir.string() + "\"]", "--set",
                                         "storage.payload_bytes=4096"});
  auto t = prompt(512, 5);  // 8 blocks
  std::vector<cache_block> blocks;
  map_token_blocks(t.data(), t.size(), 64, blocks);
  name_engine_blocks(blocks);  // the names the server stores them under
  {
    serve_process s(args);
    client c(s.endpoint());
    hello(c);
    store_prompt(c, 1, t, 8);
    CHECK(s.stop() == 0);
  }
  size_t files = 0;
  for (auto& e : fs::recursive_directory_iterator(dir))
    files += e.is_regular_file() && e.path().extension() == ".blk";
  CHECK(files == 8);
  {
    serve_process s(args);
    CHECK_THAT(s.output(), Catch::Contains("rebuilt: 8 blocks"));
    client c(s.endpoint());
    hello(c);
    reply l = c.call("lookup", 1, [&](map_writer& w) { w.put("tokens", t); });
    CHECK(l.u64("device_blocks") == 0);
    CHECK(l.u64("host_blocks") == 0);
    CHECK(l.u64("storage_blocks") == 8);
    CHECK(s.stop() == 0);
  }
  // The backend loses block 5: the rebuilt index lacks it, so only blocks 0-4 are served.
  size_t removed = 0;
  for (auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename() == file_name_of(blocks[5].hash))
      removed += fs::remove(e.path());
  REQUIRE(removed == 1);
  {
    serve_process s(args);
    CHECK_THAT(s.output(), Catch::Contains("rebuilt: 7 blocks"));
    client c(s.endpoint());
    hello(c);
    reply l = c.call("lookup", 1, [&](map_writer& w) { w.put("tokens", t); });
    CHECK(l.u64("storage_blocks") == 5);
    reply a = c.call("allocate", 2, with_tokens(1, t));
    if (a.str("state") == "pending")
      a = c.call("wait", 1, [](map_writer& w) { w.put("req", 1); });
    CHECK(a.u64("prefetched_blocks") == 5);
    reply g = step_admit(c, 1, 1, 512);
    REQUIRE(admitted(g));
    CHECK(reply::u64_in(first_admit(g), "storage_blocks") == 5);
    reply st = c.call("stats");
    CHECK(stat_of(st, "controller", "invariant_violations") == 0);
    CHECK(s.stop() == 0);
  }
  fs::remove_all(dir);
}

TEST_CASE("hashes that do not chain get blocks of their own and break nothing", "[serve]") {
  serve_process s(small());
  client c(s.endpoint());
  hello(c);
  auto run = [&](uint64_t req, std::vector<uint64_t> hashes, uint64_t step) {
    reply a = c.call("allocate", 2, [&](map_writer& w) {
      w.put("req", req);
      w.put("hashes", hashes);
    });
    if (a.str("state") == "pending")
      c.call("wait", 1, [&](map_writer& w) { w.put("req", req); });
    uint32_t tokens = static_cast<uint32_t>(hashes.size() * 64);
    reply g = step_admit(c, step, req, tokens);
    step_marks(c, step + 1, "computed", req, tokens);
    return g;
  };
  run(1, {5, 5, 5}, 1);      // one hash three times
  run(2, {1, 2}, 3);
  reply g = run(3, {3, 2}, 5);  // 2 again, under another prefix: a miss, not a hit
  CHECK(reply::u64_in(first_admit(g), "device_blocks") == 0);
  g = run(4, {1, 2, 9}, 7);   // the chain 1, 2 is found
  CHECK(reply::u64_in(first_admit(g), "device_blocks") == 2);
  for (uint64_t req : {1, 2, 3, 4})
    c.call("finish", 1, [&](map_writer& w) { w.put("req", req); });
  reply st = c.call("stats");
  CHECK(st.u64("requests") == 0);
  CHECK(stat_of(st, "controller", "invariant_violations") == 0);
  CHECK(s.stop() == 0);
}

TEST_CASE("serve restarted on the Redis backend rebuilds its index from Redis", "[serve]") {
  kvtier::test::redis_server redis;
  std::vector<std::string> args = small({"--set", "storage.backend=redis", "--set",
                                         "storage.redis=[\"" + redis.address() + "\"]", "--set",
                                         "storage.payload_bytes=4096", "--set",
                                         // the pre-start check: 10,000 x 4 KiB fit 256 MB
                                         "storage.capacity_blocks=10000"});
  auto t = prompt(512, 6);
  {
    serve_process s(args);
    client c(s.endpoint());
    hello(c);
    store_prompt(c, 1, t, 8);
    CHECK(s.stop() == 0);
  }
  serve_process s(args);
  CHECK_THAT(s.output(), Catch::Contains("rebuilt: 8 blocks"));
  client c(s.endpoint());
  hello(c);
  reply l = c.call("lookup", 1, [&](map_writer& w) { w.put("tokens", t); });
  CHECK(l.u64("storage_blocks") == 8);
  reply a = c.call("allocate", 2, with_tokens(1, t));
  if (a.str("state") == "pending")
    a = c.call("wait", 1, [](map_writer& w) { w.put("req", 1); });
  CHECK(a.u64("prefetched_blocks") == 8);
  CHECK(s.stop() == 0);
}

TEST_CASE("calls sent together are each answered once, however the server batches them",
          "[serve]") {
  // More calls than the socket thread reads in one wake-up (256), from two clients at once,
  // good and bad mixed: each comes back once, with its own id and its own answer.
  serve_process s(small({"--set", "serve.max_message_bytes=4096"}));
  client a(s.endpoint()), b(s.endpoint());
  hello(a);
  hello(b);
  std::map<uint64_t, std::string> want_a, want_b;
  for (int i = 0; i < 300; ++i) {
    client& c = i % 2 ? b : a;
    auto& want = i % 2 ? want_b : want_a;
    switch (i % 5) {
      case 0: want[c.send("ping", 0)] = "ping"; break;
      case 1:
        want[c.send("lookup", 1, [&](map_writer& w) { w.put("tokens", prompt(128, i)); })] =
          "lookup";
        break;
      case 2: want[c.send("fly", 0)] = "unknown_op"; break;
      case 3:
        want[c.send("wait", 1, [&](map_writer& w) { w.put("req", 1000 + i); })] = "bad_request";
        break;
      default:
        want[c.send("lookup", 1, [&](map_writer& w) { w.put("tokens", prompt(2000, i)); })] =
          "too_large";
    }
  }
  auto collect = [](client& c, std::map<uint64_t, std::string>& want) {
    size_t expected = want.size();
    for (size_t got = 0; got < expected; ++got) {
      std::optional<reply> r = c.next(std::chrono::seconds(20));
      REQUIRE(r);
      uint64_t id = r->u64("id");
      bool ok = r->flag("ok");
      // too_large replies are not decoded, so they carry id 0: matched by kind
      std::string kind = ok ? (r->find("device_blocks") ? "lookup" : "ping") : r->str("error");
      auto it = kind == "too_large"
                  ? std::find_if(want.begin(), want.end(),
                                 [](const auto& w) { return w.second == "too_large"; })
                  : want.find(id);
      REQUIRE(it != want.end());
      CHECK(it->second == kind);
      want.erase(it);
    }
    CHECK(want.empty());
  };
  collect(a, want_a);
  collect(b, want_b);
  reply st = a.call("stats");
  CHECK(stat_of(st, "errors", "too_large") == 60);
  CHECK(stat_of(st, "errors", "unknown_op") == 60);
  CHECK(stat_of(st, "errors", "bad_request") == 60);
  CHECK(s.stop() == 0);
}

TEST_CASE("kvtier bench serve counts messages and the verb calls they carry apart", "[serve]") {
  serve_process s({"--speed", "1000", "--set", "cache.storage_write=never"});
  fs::path out = fs::temp_directory_path() / ("kvtier-bench-serve-" + std::to_string(::getpid()));
  fs::create_directories(out);
  int echo_port = kvtier::test::free_loopback_port();
  std::string cmd = std::string(KVTIER_BINARY) + " bench serve --connect " + s.endpoint() +
                    " --echo-port " + std::to_string(echo_port) + " --trace " +
                    KVTIER_SOURCE_DIR + "/traces/mooncake_conversation_sample.jsonl" +
                    " --clients 2 --requests-per-step 4 --seconds 0.5 --set "
                    "cache.storage_write=never --json " + (out / "serve.json").string() +
                    " > /dev/null 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::ifstream in(out / "serve.json");
  nlohmann::json j = nlohmann::json::parse(in);
  auto count = [&](const char* row) {
    return j["rows"].contains(row) ? j["rows"][row]["count"].get<uint64_t>() : uint64_t{0};
  };
  uint64_t lookups = count("lookup"), allocates = count("allocate"), waits = count("wait"),
           steps = count("step");
  // Each round of an engine: 4 lookups, 4 allocations, a wait per pending one, then a step
  // admitting the 4 and a step computing the admitted ones and finishing the 4.
  REQUIRE(lookups > 0);
  CHECK(lookups % 4 == 0);
  CHECK(allocates == lookups);
  CHECK(steps == lookups / 2);
  CHECK(waits <= allocates);
  CHECK(j["messages"].get<uint64_t>() == lookups + allocates + waits + steps);
  uint64_t rounds = lookups / 4;
  uint64_t verbs = j["verb_calls"].get<uint64_t>();
  uint64_t floor = lookups + allocates + waits + 8 * rounds;  // admits and finishes
  CHECK(verbs >= floor);
  CHECK(verbs <= floor + 4 * rounds);                          // computed: the admitted ones
  CHECK(count("verbs") == verbs);
  CHECK(j["echo_messages_per_s"].get<double>() > 0);
  CHECK(j["ratio_to_echo"].get<double>() > 0);
  fs::remove_all(out);
  CHECK(s.stop() == 0);
}

TEST_CASE("real mode: a modelled server refuses tensors clearly and negotiates version 2",
          "[serve]") {
  serve_process s(small());
  // versions [1, 2]: the highest common one; version 2's hello reply says nothing is attached.
  client a(s.endpoint());
  reply r = a.call("hello", 4, [](map_writer& w) {
    w.key("versions").pack(std::vector<uint32_t>{1, 2});
    w.put_str("name", "v2");
    w.put("block_size", 64);
    put_default_model(w);
  });
  CHECK(r.u64("version") == 2);
  a.set_engine(r.u64("engine"));
  CHECK_FALSE(r.flag("attached"));
  CHECK_FALSE(r.flag("verify"));
  // A version-1 engine gets the version-1 reply.
  client one(s.endpoint());
  reply r1 = one.hello("v1", shape(32, "bf16"), 64);
  CHECK(r1.u64("version") == 1);
  CHECK(r1.find("attached") == nullptr);
  // An engine exporting its tensors: refused with what to do.
  attach_request t;
  t.present = true;
  t.device_blocks = 16;
  t.layer_handles.assign(32, ipc_bytes{});
  t.layer_offsets.assign(32, 0);
  t.event_slots = 1;
  t.events.assign(32, ipc_bytes{});
  client b(s.endpoint());
  try {
    b.hello("real", shape(32, "bf16"), 64, &t);
    FAIL("a modelled server accepted an engine's tensors");
  } catch (const remote_error& e) {
    CHECK(e.kind == "bad_request");
    CHECK_THAT(e.what(), Catch::Contains("this server models the device"));
    CHECK_THAT(e.what(), Catch::Contains("--backend cuda"));
  }
  // bench_swap needs an attached engine.
  uint64_t id = a.send("bench_swap", 1, [](map_writer& w) { w.put("blocks", 4); });
  CHECK_THAT(error_of(a, id), Catch::Contains("bad_request: bench_swap needs an attached engine"));
  // The server goes on; once it has taken an allocate, bench_swap is refused for that first.
  CHECK(allocate_ready(a, 1, prompt(128, 1)).u64("prefetched_blocks") == 0);
  CHECK(a.call("stats").u64("engines") == 2);
  id = a.send("bench_swap", 1, [](map_writer& w) { w.put("blocks", 4); });
  CHECK_THAT(error_of(a, id), Catch::Contains("runs only before the server's first allocate"));
  CHECK(s.stop() == 0);
}

TEST_CASE("real mode options are refused where they cannot work", "[serve]") {
  auto code = [](const std::string& args) {
    int status = std::system((std::string(KVTIER_BINARY) + " " + args + " > /dev/null 2>&1")
                               .c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  CHECK(code("serve --verify --bind tcp://127.0.0.1:1") == 2);
  CHECK(code("engine-sim --verify --connect tcp://127.0.0.1:1") == 2);
  CHECK(code("engine-sim --swap-bench 4 --connect tcp://127.0.0.1:1") == 2);
  if (!gpu::cuda_built()) {
    // The build without CUDA refuses real mode by its option, as bad input.
    CHECK(code("serve --backend cuda --bind tcp://127.0.0.1:1") == 2);
    CHECK(code("engine-sim --backend cuda --connect tcp://127.0.0.1:1") == 2);
  }
}
