#include "serve/wire/stats_reply.hpp"

#include <string>

#include "serve/wire/fields.hpp"
#include "serve/wire/map_writer.hpp"

namespace kvtier::serve {

namespace {

template <size_t N, class Name>
void pack_counts(map_writer& m, std::string_view key, const std::array<uint64_t, N>& counts,
                 Name name_of) {
  auto& pk = m.key(key);
  pk.pack_map(static_cast<uint32_t>(N));
  for (size_t i = 0; i < N; ++i) {
    pk.pack(std::string(name_of(i)));
    pk.pack(counts[i]);
  }
}

// Names this build does not know (a newer server's verbs) are skipped.
template <size_t N, class Index>
void read_counts(const msgpack::object& reply, std::string_view key,
                 std::array<uint64_t, N>& counts, Index index_of) {
  const msgpack::object_map& map = wire::as_map(wire::field(reply, key), key);
  for (uint32_t i = 0; i < map.size; ++i) {
    const auto& kv = map.ptr[i];
    uint64_t count = wire::as_uint(kv.val, key);
    if (auto at = index_of(wire::as_key(kv.key)))
      counts[*at] = count;
  }
}

void pack_controller(map_writer& m, const controller_report& cr) {
  m.key("controller");
  map_writer c(m.buffer(), 12);
  c.put("device_used", cr.device_used);
  c.put("host_used", cr.host_used);
  c.put("tree_nodes", cr.tree_nodes);
  c.put("swap_ins", cr.swap_ins);
  c.put("backups", cr.backups);
  c.put("write_backs", cr.write_backs);
  c.put("loads", cr.loads);
  c.put("stores", cr.stores);
  c.put("device_evictions", cr.device_evictions);
  c.put("host_evictions", cr.host_evictions);
  c.put("invariant_violations", cr.invariant_violations);
  c.put("copies_in_flight", cr.copies_in_flight);
}

controller_report read_controller(const msgpack::object& c) {
  controller_report cr;
  cr.device_used = wire::u32(c, "device_used");
  cr.host_used = wire::u32(c, "host_used");
  cr.tree_nodes = wire::u32(c, "tree_nodes");
  cr.swap_ins = wire::u64(c, "swap_ins");
  cr.backups = wire::u64(c, "backups");
  cr.write_backs = wire::u64(c, "write_backs");
  cr.loads = wire::u64(c, "loads");
  cr.stores = wire::u64(c, "stores");
  cr.device_evictions = wire::u64(c, "device_evictions");
  cr.host_evictions = wire::u64(c, "host_evictions");
  cr.invariant_violations = wire::u64(c, "invariant_violations");
  cr.copies_in_flight = wire::u64(c, "copies_in_flight");
  return cr;
}

void pack_storage(map_writer& m, const storage_report& sr) {
  m.key("storage");
  map_writer s(m.buffer(), 5);
  s.put("stored", sr.stored);
  s.put("capacity", sr.capacity);
  s.put("rebuilt", sr.rebuilt);
  s.put("misses", sr.misses);
  s.put_str("backend", sr.backend);
}

storage_report read_storage(const msgpack::object& s) {
  storage_report sr;
  sr.stored = wire::u64(s, "stored");
  sr.capacity = wire::u64(s, "capacity");
  sr.rebuilt = wire::u64(s, "rebuilt");
  sr.misses = wire::u64(s, "misses");
  sr.backend = wire::str(s, "backend");
  return sr;
}

}  // namespace

void encode_stats_reply(msgpack::sbuffer& buf, uint64_t id, const stats_answer& a) {
  auto m = ok_reply(buf, id, 8);
  m.put("engines", a.engines);
  m.put("requests", a.requests);
  pack_counts(m, "calls", a.calls, [](size_t i) { return verb_name(static_cast<verb>(i)); });
  pack_counts(m, "errors", a.errors,
              [](size_t i) { return error_name(static_cast<error_kind>(i)); });
  pack_controller(m, a.controller);
  pack_storage(m, a.storage);
  m.put("now_ns", a.now_ns);
  m.put("refused_connections", a.refused_connections);
}

stats_answer decode_stats_reply(const msgpack::object& reply) {
  stats_answer a;
  a.engines = wire::u64(reply, "engines");
  a.requests = wire::u64(reply, "requests");
  read_counts(reply, "calls", a.calls, [](std::string_view name) -> std::optional<size_t> {
    if (auto v = verb_of(name))
      return static_cast<size_t>(*v);
    return std::nullopt;
  });
  read_counts(reply, "errors", a.errors, [](std::string_view name) -> std::optional<size_t> {
    if (auto k = error_kind_of(name))
      return static_cast<size_t>(*k);
    return std::nullopt;
  });
  a.controller = read_controller(wire::field(reply, "controller"));
  a.storage = read_storage(wire::field(reply, "storage"));
  a.now_ns = wire::i64(reply, "now_ns");
  if (wire::find(reply, "refused_connections"))  // a server before it had none to say
    a.refused_connections = wire::u64(reply, "refused_connections");
  return a;
}

}  // namespace kvtier::serve
