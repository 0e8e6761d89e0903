// An engine's calls and liveness belong to the connection that registered it, its step numbers
// are one increasing sequence, and error replies stay decodable whatever a client sent
// (docs/protocol.md, "Engines and connections").

#include <catch2/catch.hpp>

#include <thread>

#include "serve/client/client.hpp"
#include "serve/wire/error_reply.hpp"
#include "serve/wire/map_writer.hpp"
#include "tests/serve/serve_process.hpp"

using namespace kvtier;
using namespace kvtier::serve;
using kvtier::test::serve_process;

namespace {

std::vector<std::string> small(std::vector<std::string> more = {}) {
  std::vector<std::string> args = {"--set", "cache.device_tokens=1024", "--set",
                                   "cache.host_tokens=4096"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

void hello(client& c) {
  model_shape m;
  m.name = "llama3-8b";
  m.layers = 32;
  m.kv_heads = 8;
  m.head_dim = 128;
  m.kv_dtype = "bf16";
  c.hello("test", m, 64);
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

uint64_t send_step(client& c, uint64_t step, const char* key, uint64_t req, uint32_t tokens) {
  return c.send("step", 2, [&](map_writer& w) {
    w.put("step", step);
    auto& pk = w.key(key);
    pk.pack_array(1);
    pk.pack_array(2);
    pk.pack(req);
    pk.pack(tokens);
  });
}

std::string error_of(client& c, uint64_t id) {
  reply r = c.receive(id);
  REQUIRE_FALSE(r.flag("ok"));
  return r.str("error") + ": " + r.str("message");
}

}  // namespace

TEST_CASE("an engine's requests answer only the connection that registered it", "[serve]") {
  serve_process s(small());
  client a(s.endpoint());
  hello(a);
  allocate_ready(a, 1, prompt(128, 1));
  REQUIRE(a.receive(send_step(a, 1, "admits", 1, 128)).flag("ok"));
  client intruder(s.endpoint());  // never said hello
  uint64_t id = intruder.send("finish", 2, [&](map_writer& w) {
    w.put("engine", a.engine());
    w.put("req", uint64_t{1});
  });
  CHECK_THAT(error_of(intruder, id),
             Catch::StartsWith("not_registered: engine 1 was registered on another connection"));
  id = intruder.send("bye", 1, [&](map_writer& w) { w.put("engine", a.engine()); });
  CHECK_THAT(error_of(intruder, id), Catch::StartsWith("not_registered"));
  CHECK(a.call("stats").u64("requests") == 1);  // still a's
  reply f = a.call("finish", 1, [](map_writer& w) { w.put("req", uint64_t{1}); });
  CHECK(f.u64("step") == 2);
  CHECK(a.call("stats").u64("requests") == 0);
  CHECK(s.stop() == 0);
}

TEST_CASE("ping with its engine keeps it alive, from its own connection only", "[serve]") {
  serve_process s(small({"--set", "serve.client_timeout_s=1"}));
  client a(s.endpoint());
  hello(a);
  allocate_ready(a, 1, prompt(128, 1));
  client other(s.endpoint());
  auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2500);
  while (std::chrono::steady_clock::now() < until) {
    a.call("ping");  // the client names its engine
    other.call("ping", 1, [&](map_writer& w) { w.put("engine", a.engine()); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  reply st = a.call("stats");
  CHECK(st.u64("engines") == 1);
  CHECK(st.u64("requests") == 1);
  // Pings from another connection do not: a falls silent and is dropped.
  until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (other.call("stats").u64("engines") > 0 && std::chrono::steady_clock::now() < until) {
    other.call("ping", 1, [&](map_writer& w) { w.put("engine", a.engine()); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(other.call("stats").u64("engines") == 0);
  CHECK(s.stop() == 0);
}

TEST_CASE("step and its shorthands share one increasing step counter", "[serve]") {
  serve_process s(small());
  client c(s.endpoint());
  hello(c);
  allocate_ready(c, 1, prompt(128, 1));
  allocate_ready(c, 2, prompt(128, 2));
  REQUIRE(c.receive(send_step(c, 1, "admits", 1, 128)).flag("ok"));
  REQUIRE(c.receive(send_step(c, 2, "admits", 2, 128)).flag("ok"));
  reply r = c.call("commit", 2, [](map_writer& w) {
    w.put("req", uint64_t{1});
    w.put("tokens", uint32_t{128});
  });
  CHECK(r.u64("step") == 3);
  CHECK_THAT(error_of(c, send_step(c, 3, "computed", 2, 128)),
             Catch::Contains("bad_request: step 3 does not follow step 3"));
  CHECK_THAT(error_of(c, send_step(c, 2, "computed", 2, 128)),
             Catch::Contains("step 2 does not follow step 3"));
  CHECK(c.receive(send_step(c, 7, "computed", 2, 128)).u64("step") == 7);
  r = c.call("finish", 1, [](map_writer& w) { w.put("req", uint64_t{2}); });
  CHECK(r.u64("step") == 8);
  CHECK(s.stop() == 0);
}

TEST_CASE("an error reply escapes bytes that are not UTF-8", "[serve]") {
  serve_process s(small());
  client c(s.endpoint());
  // {"op": "\xff\xfe", "id": 7}
  c.send_raw(std::string("\x82\xa2op\xa2\xff\xfe\xa2id\x07", 11));
  auto r = c.next(std::chrono::seconds(10));
  REQUIRE(r);
  CHECK(r->u64("id") == 7);
  CHECK(r->str("error") == "unknown_op");
  CHECK(r->str("message") == "unknown op '\\xff\\xfe'");
  CHECK(escape_invalid_utf8("caf\xc3\xa9 \xe2\x82") == "caf\xc3\xa9 \\xe2\\x82");
  CHECK(escape_invalid_utf8("\xed\xa0\x80") == "\\xed\\xa0\\x80");  // a surrogate
  CHECK(escape_invalid_utf8("\xf0\x9f\x98\x80") == "\xf0\x9f\x98\x80");
  CHECK(s.stop() == 0);
}
