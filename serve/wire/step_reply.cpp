#include "serve/wire/step_reply.hpp"

#include "serve/wire/fields.hpp"
#include "serve/wire/map_writer.hpp"

namespace kvtier::serve {

namespace {

void pack_admits(map_writer& m, const std::vector<admit_result>& admits,
                 const std::vector<std::vector<uint32_t>>& load_blocks) {
  auto& pk = m.key("admits");
  pk.pack_array(static_cast<uint32_t>(admits.size()));
  bool v3 = !load_blocks.empty();
  for (size_t i = 0; i < admits.size(); ++i) {
    const admit_result& a = admits[i];
    map_writer one(m.buffer(), 8 + (v3 ? 1 : 0));
    if (v3)
      one.put("load_blocks", load_blocks.at(i));
    one.put("req", a.req);
    one.put("admitted", a.admitted);
    one.put("device_blocks", a.device_blocks);
    one.put("host_blocks", a.host_blocks);
    one.put("storage_blocks", a.storage_blocks);
    one.put("device_tokens", a.device_tokens);
    one.put("host_tokens", a.host_tokens);
    one.put("storage_tokens", a.storage_tokens);
  }
}

std::vector<admit_result> read_admits(const msgpack::object& reply,
                                      std::vector<std::vector<uint32_t>>& load_blocks) {
  std::vector<admit_result> out;
  const msgpack::object_array& admits = wire::array(reply, "admits");
  for (uint32_t i = 0; i < admits.size; ++i) {
    const msgpack::object& x = admits.ptr[i];
    admit_result a;
    a.req = wire::u64(x, "req");
    a.admitted = wire::flag(x, "admitted");
    a.device_blocks = wire::u32(x, "device_blocks");
    a.host_blocks = wire::u32(x, "host_blocks");
    a.storage_blocks = wire::u32(x, "storage_blocks");
    a.device_tokens = wire::u64(x, "device_tokens");
    a.host_tokens = wire::u64(x, "host_tokens");
    a.storage_tokens = wire::u64(x, "storage_tokens");
    if (const msgpack::object* ids = wire::find(x, "load_blocks")) {
      load_blocks.resize(admits.size);
      load_blocks[i] = wire::as_u32s(*ids, "load_blocks");
    }
    out.push_back(a);
  }
  return out;
}

}  // namespace

void encode_step_reply(msgpack::sbuffer& buf, uint64_t id, const step_answer& a,
                       copy_backend_kind backend) {
  bool real = backend == copy_backend_kind::cuda;
  const grant& g = a.granted;
  auto m = ok_reply(buf, id, 6 + (real ? 1 : 0));
  m.put("step", g.step);
  pack_admits(m, g.admits, a.load_blocks);
  m.put("failed_grows", g.failed_grows);
  m.put("available_blocks", g.available_blocks);
  m.put("layer_ready_ns", g.layer_ready_ns);
  m.put("now_ns", a.now_ns);
  if (!real)
    return;
  auto& sw = m.key("swap_in");
  if (!a.swap_in) {
    sw.pack_nil();
    return;
  }
  map_writer one(buf, 3);
  one.put("slot", a.swap_in->slot);
  one.put("layers", a.swap_in->layers);
  pack_block_patterns(one.key("blocks"), a.swap_in->blocks);
}

step_answer decode_step_reply(const msgpack::object& reply) {
  step_answer a;
  grant& g = a.granted;
  g.step = wire::u64(reply, "step");
  g.admits = read_admits(reply, a.load_blocks);
  g.failed_grows = wire::u64s(reply, "failed_grows");
  g.available_blocks = wire::u32(reply, "available_blocks");
  g.layer_ready_ns = wire::i64s(reply, "layer_ready_ns");
  a.now_ns = wire::i64(reply, "now_ns");
  const msgpack::object* sw = wire::find(reply, "swap_in");
  if (sw && sw->type != msgpack::type::NIL) {
    swap_in_slot s;
    s.slot = wire::u32(*sw, "slot");
    s.layers = wire::u32(*sw, "layers");
    s.blocks = block_patterns(wire::field(*sw, "blocks"));
    a.swap_in = std::move(s);
  }
  return a;
}

void pack_block_patterns(msgpack::packer<msgpack::sbuffer>& out,
                         const std::vector<gpu::block_pattern>& blocks) {
  out.pack_array(static_cast<uint32_t>(blocks.size()));
  for (const gpu::block_pattern& b : blocks) {
    out.pack_array(2);
    out.pack(b.block);
    out.pack(b.hash);
  }
}

std::vector<gpu::block_pattern> block_patterns(const msgpack::object& blocks) {
  std::vector<gpu::block_pattern> out;
  const msgpack::object_array& list = wire::as_array(blocks, "blocks");
  for (uint32_t i = 0; i < list.size; ++i) {
    const msgpack::object_array& pair = wire::as_array(list.ptr[i], "blocks");
    if (pair.size != 2)
      throw wire::field_error("'blocks' entries must be [device block, key]");
    out.push_back({wire::as_u32(pair.ptr[0], "blocks"), wire::as_uint(pair.ptr[1], "blocks")});
  }
  return out;
}

}  // namespace kvtier::serve
