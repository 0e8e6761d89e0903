#include "serve/wire/probe_reply.hpp"

#include "serve/wire/fields.hpp"
#include "serve/wire/map_writer.hpp"

namespace kvtier::serve {

void encode_probe_reply(msgpack::sbuffer& buf, uint64_t id, const probe_reply& r) {
  auto m = ok_reply(buf, id, 4);
  m.put("step", r.step);
  m.put("available_blocks", r.available_blocks);
  auto& pk = m.key("matches");
  pk.pack_array(static_cast<uint32_t>(r.matches.size()));
  for (const candidate_match& cm : r.matches) {
    map_writer one(buf, 6);
    one.put("req", cm.req);
    one.put("device_blocks", cm.device_blocks);
    one.put("host_blocks", cm.host_blocks);
    one.put("device_tokens", cm.device_tokens);
    one.put("host_tokens", cm.host_tokens);
    one.put("idle_device_blocks", cm.idle_device_blocks);
  }
  m.put("victim_frees", r.victim_frees);
}

probe_reply decode_probe_reply(const msgpack::object& reply) {
  probe_reply r;
  r.step = wire::u64(reply, "step");
  r.available_blocks = wire::u32(reply, "available_blocks");
  const msgpack::object_array& matches = wire::array(reply, "matches");
  for (uint32_t i = 0; i < matches.size; ++i) {
    const msgpack::object& x = matches.ptr[i];
    candidate_match cm;
    cm.req = wire::u64(x, "req");
    cm.device_blocks = wire::u32(x, "device_blocks");
    cm.host_blocks = wire::u32(x, "host_blocks");
    cm.device_tokens = wire::u64(x, "device_tokens");
    cm.host_tokens = wire::u64(x, "host_tokens");
    cm.idle_device_blocks = wire::u32(x, "idle_device_blocks");
    r.matches.push_back(cm);
  }
  r.victim_frees = wire::u32s(reply, "victim_frees");
  return r;
}

}  // namespace kvtier::serve
