// The wire bytes of every reply and of the client stub's calls, pinned (serve/wire/): a change
// to one is a change of the protocol (docs/protocol.md).

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
