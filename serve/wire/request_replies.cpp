#include "serve/wire/request_replies.hpp"

#include "serve/wire/fields.hpp"
#include "serve/wire/map_writer.hpp"

namespace kvtier::serve {

void encode_lookup_reply(msgpack::sbuffer& buf, uint64_t id, const lookup_answer& a) {
  auto m = ok_reply(buf, id, 6);
  m.put("device_blocks", a.hit.device_blocks);
  m.put("host_blocks", a.hit.host_blocks);
  m.put("storage_blocks", a.storage_blocks);
  m.put("device_tokens", a.hit.device_tokens);
  m.put("host_tokens", a.hit.host_tokens);
  m.put("storage_tokens", a.storage_tokens);
}

lookup_answer decode_lookup_reply(const msgpack::object& reply) {
  lookup_answer a;
  a.hit.device_blocks = wire::u32(reply, "device_blocks");
  a.hit.host_blocks = wire::u32(reply, "host_blocks");
  a.storage_blocks = wire::u32(reply, "storage_blocks");
  a.hit.device_tokens = wire::u64(reply, "device_tokens");
  a.hit.host_tokens = wire::u64(reply, "host_tokens");
  a.storage_tokens = wire::u64(reply, "storage_tokens");
  return a;
}

void encode_allocate_reply(msgpack::sbuffer& buf, uint64_t id, const std::optional<ready>& r) {
  auto m = ok_reply(buf, id, r ? 3 : 1);
  m.put_str("state", r ? "ready" : "pending");
  if (r) {
    m.put("prefetched_blocks", r->prefetched_blocks);
    m.put("available_blocks", r->available_blocks);
  }
}

std::optional<ready> decode_allocate_reply(const msgpack::object& reply, request_id req) {
  std::string state = wire::str(reply, "state");
  if (state == "pending")
    return std::nullopt;
  if (state != "ready")
    throw wire::field_error("'state' is '" + state + "', not 'ready' or 'pending'");
  return decode_wait_reply(reply, req);
}

void encode_wait_reply(msgpack::sbuffer& buf, uint64_t id, const ready& r) {
  auto m = ok_reply(buf, id, 2);
  m.put("prefetched_blocks", r.prefetched_blocks);
  m.put("available_blocks", r.available_blocks);
}

ready decode_wait_reply(const msgpack::object& reply, request_id req) {
  return {req, wire::u32(reply, "prefetched_blocks"), wire::u32(reply, "available_blocks")};
}

}  // namespace kvtier::serve
