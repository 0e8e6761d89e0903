#include "serve/wire/session_replies.hpp"

#include "serve/wire/call.hpp"
#include "serve/wire/fields.hpp"
#include "serve/wire/map_writer.hpp"
#include "serve/wire/step_reply.hpp"

namespace kvtier::serve {

namespace {

// The server's build (docs/protocol.md, `hello`): an engine's logs can name the server's code.
void put_build(map_writer& m, const build_info& b) {
  m.key("kvtier");
  map_writer k(m.buffer(), 5);
  k.put_str("version", b.version);
  k.put_str("commit", b.commit);
  k.put_str("build_type", b.build_type);
  k.put_str("compiler", b.compiler);
  k.put_str("cuda", b.cuda);
}

build_info read_build(const msgpack::object& k) {
  return {wire::str(k, "version"), wire::str(k, "commit"), wire::str(k, "build_type"),
          wire::str(k, "compiler"), wire::str(k, "cuda")};
}

}  // namespace

void encode_hello_reply(msgpack::sbuffer& buf, uint64_t id, const hello_answer& a) {
  bool v2 = a.version >= attach_version;
  bool v3 = a.version >= engine_tier_version;
  auto m = ok_reply(buf, id, 10 + (v2 ? 2 : 0) + (v3 ? 1 : 0));
  m.put("version", a.version);
  if (v2) {
    m.put("attached", a.attached);
    m.put("verify", a.verify);
  }
  if (v3)
    m.put_str("device_owner", a.owner == session::device_owner::engine ? "engine" : "kvtier");
  m.put("engine", a.engine);
  m.put("block_size", a.block_size);
  m.put("layers", a.layers);
  m.put("device_blocks", a.device_blocks);
  m.put("host_blocks", a.host_blocks);
  m.put("tiers", a.tiers);
  m.put("now_ns", a.now_ns);
  m.put("speed", a.speed);
  put_build(m, a.kvtier);
}

hello_answer decode_hello_reply(const msgpack::object& reply) {
  hello_answer a;
  a.version = wire::u32(reply, "version");
  if (a.version >= attach_version) {
    a.attached = wire::flag(reply, "attached");
    a.verify = wire::flag(reply, "verify");
  }
  if (a.version >= engine_tier_version) {
    std::string owner = wire::str(reply, "device_owner");
    if (owner != "engine" && owner != "kvtier")
      throw wire::field_error("'device_owner' is '" + owner + "', not 'engine' or 'kvtier'");
    a.owner = owner == "engine" ? session::device_owner::engine : session::device_owner::kvtier;
  }
  a.engine = wire::u64(reply, "engine");
  a.block_size = wire::u32(reply, "block_size");
  a.layers = wire::u32(reply, "layers");
  a.device_blocks = wire::u32(reply, "device_blocks");
  a.host_blocks = wire::u32(reply, "host_blocks");
  const msgpack::object_array& tiers = wire::array(reply, "tiers");
  for (uint32_t i = 0; i < tiers.size; ++i)
    a.tiers.push_back(wire::as_str(tiers.ptr[i], "tiers"));
  a.now_ns = wire::i64(reply, "now_ns");
  a.speed = wire::f64(reply, "speed");
  a.kvtier = read_build(wire::field(reply, "kvtier"));
  return a;
}

void encode_ping_reply(msgpack::sbuffer& buf, uint64_t id, int64_t now_ns) {
  ok_reply(buf, id, 1).put("now_ns", now_ns);
}

int64_t decode_ping_reply(const msgpack::object& reply) { return wire::i64(reply, "now_ns"); }

void encode_bye_reply(msgpack::sbuffer& buf, uint64_t id, uint64_t released) {
  ok_reply(buf, id, 1).put("released", released);
}

uint64_t decode_bye_reply(const msgpack::object& reply) { return wire::u64(reply, "released"); }

void encode_bench_swap_reply(msgpack::sbuffer& buf, uint64_t id, const bench_swap_answer& a) {
  auto m = ok_reply(buf, id, 5);
  m.put("bytes", a.bytes);
  m.put("gbps", a.gbps);
  m.put("slot", a.slot);
  m.put("layers", a.layers);
  pack_block_patterns(m.key("blocks"), a.blocks);
}

bench_swap_answer decode_bench_swap_reply(const msgpack::object& reply) {
  bench_swap_answer a;
  a.bytes = wire::u64(reply, "bytes");
  a.gbps = wire::f64s(reply, "gbps");
  a.slot = wire::u32(reply, "slot");
  a.layers = wire::u32(reply, "layers");
  a.blocks = block_patterns(wire::field(reply, "blocks"));
  return a;
}

}  // namespace kvtier::serve
