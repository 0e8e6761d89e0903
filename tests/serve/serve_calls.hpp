#pragma once

// What the tests of kvtier serve share (tests/serve/serve_*_test.cpp): a small instance, the
// model hello and the calls of a request's life, each checked as an engine would.

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/block_hash.hpp"
#include "core/build_info.hpp"
#include "serve/server/block_names.hpp"
#include "gpu/device_info.hpp"
#include "serve/client/client.hpp"
#include "tests/serve/serve_process.hpp"

namespace kvtier::test::serve_calls {

namespace fs = std::filesystem;
using namespace kvtier;
using namespace kvtier::serve;


// A small instance: 16 device blocks, 64 host blocks, storage on (the modelled pool).
inline std::vector<std::string> small(std::vector<std::string> more = {}) {
  std::vector<std::string> args = {"--set", "cache.device_tokens=1024", "--set",
                                   "cache.host_tokens=4096"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// Llama-3-8B's KV shape with `layers` layers of `dtype`.
inline model_shape shape(uint32_t layers, const std::string& dtype) {
  model_shape m;
  m.name = "llama3-8b";
  m.layers = layers;
  m.kv_heads = 8;
  m.head_dim = 128;
  m.kv_dtype = dtype;
  return m;
}

inline void hello(client& c, uint32_t layers = 32, const std::string& dtype = "bf16") {
  c.hello("test", shape(layers, dtype), 64);
}

// hello's `model`, written by hand where a test needs a hello the client's own would not send.
inline void put_default_model(map_writer& w) {
  w.key("model");
  auto& pk = w.packer();  // the nested map goes through the same packer
  pk.pack_map(5);
  pk.pack(std::string("name")); pk.pack(std::string("llama3-8b"));
  pk.pack(std::string("layers")); pk.pack(32);
  pk.pack(std::string("kv_heads")); pk.pack(8);
  pk.pack(std::string("head_dim")); pk.pack(128);
  pk.pack(std::string("kv_dtype")); pk.pack(std::string("bf16"));
}

inline std::vector<int32_t> prompt(size_t n, int32_t seed) {
  std::vector<int32_t> t(n);
  for (size_t i = 0; i < n; ++i)
    t[i] = static_cast<int32_t>(seed * 100003 + i);
  return t;
}

inline std::function<void(map_writer&)> with_tokens(uint64_t req, const std::vector<int32_t>& t) {
  return [req, t](map_writer& w) {
    w.put("req", req);
    w.put("tokens", t);
  };
}

// allocate, then wait when the answer is "pending" (storage is asked, or loads are under way).
inline reply allocate_ready(client& c, uint64_t req, const std::vector<int32_t>& t) {
  reply a = c.call("allocate", 2, with_tokens(req, t));
  if (a.str("state") == "ready")
    return a;
  CHECK(a.str("state") == "pending");
  return c.call("wait", 1, [req](map_writer& w) { w.put("req", req); });
}

inline reply step_admit(client& c, uint64_t step, uint64_t req, uint32_t tokens) {
  return c.call("step", 2, [&](map_writer& w) {
    w.put("step", step);
    auto& pk = w.key("admits");
    pk.pack_array(1);
    pk.pack_array(2);
    pk.pack(req);
    pk.pack(tokens);
  });
}

inline reply step_marks(client& c, uint64_t step, const char* key, uint64_t req, uint32_t tokens) {
  return c.call("step", 2, [&](map_writer& w) {
    w.put("step", step);
    auto& pk = w.key(key);
    pk.pack_array(1);
    pk.pack_array(2);
    pk.pack(req);
    pk.pack(tokens);
  });
}

inline const msgpack::object& first_admit(const reply& r) {
  const msgpack::object* a = r.find("admits");
  REQUIRE(a);
  REQUIRE(a->type == msgpack::type::ARRAY);
  REQUIRE(a->via.array.size == 1);
  return a->via.array.ptr[0];
}

inline bool admitted(const reply& r) {
  const msgpack::object* x = reply::find_in(first_admit(r), "admitted");
  return x && x->via.boolean;
}

// Sends `bytes` as a call frame, as they are; the error its reply names ("kind: message").
inline std::string raw_error(client& c, const std::string& bytes) {
  c.send_raw(bytes);
  auto r = c.next(std::chrono::seconds(10));
  REQUIRE(r);
  REQUIRE_FALSE(r->flag("ok"));
  return r->str("error") + ": " + r->str("message");
}

inline std::string error_of(client& c, uint64_t id) {
  reply r = c.receive(id);
  REQUIRE_FALSE(r.flag("ok"));
  return r.str("error") + ": " + r.str("message");
}

inline uint64_t stat_of(const reply& stats, const char* group, const char* key) {
  const msgpack::object* g = stats.find(group);
  REQUIRE(g);
  return reply::u64_in(*g, key);
}


}  // namespace kvtier::test::serve_calls
