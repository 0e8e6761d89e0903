// The session verbs (docs/protocol.md): hello registers an engine, ping keeps it registered,
// bye releases its requests, stats reads the server's, the controller's and storage's counters.

#include <algorithm>

#include "core/build_info.hpp"
#include "serve/codec/stats_reply.hpp"
#include "serve/off_actor_lookups.hpp"
#include "serve/server_state.hpp"

namespace kvtier::serve {

namespace {

// The server's build (docs/protocol.md, `hello`): an engine's logs can name the server's code.
void put_build(map_writer& m) {
  const build_info& b = this_build();
  auto& pk = m.key("kvtier");
  pk.pack_map(5);
  for (const auto& [k, v] : {std::pair<const char*, const std::string&>{"version", b.version},
                             {"commit", b.commit}, {"build_type", b.build_type},
                             {"compiler", b.compiler}, {"cuda", b.cuda}}) {
    pk.pack(std::string(k));
    pk.pack(v);
  }
}

}  // namespace

void do_hello(self_ptr self, ctx& x) {
  auto& st = self->state;
  const auto& s = st.settings;
  const call& c = x.c;
  // A real server loads into the blocks its own device tier chose (version 2) or the engine
  // named (version 3); either way on the engine's tensors (docs/protocol.md).
  uint32_t highest = protocol_version;
  uint32_t version = 0;
  for (uint64_t v : c.versions)
    if (v >= protocol_version_min && v <= highest)
      version = std::max(version, static_cast<uint32_t>(v));
  if (version == 0)
    return fail(self, x.conn, c.op, c.id, x.since, error_kind::version,
                "no common protocol version: the server speaks "
                  + std::to_string(protocol_version_min) + " to " + std::to_string(highest));
  auto mismatch = [&](const std::string& field, const std::string& theirs,
                      const std::string& ours) {
    fail(self, x.conn, c.op, c.id, x.since, error_kind::model_mismatch,
         field + " is " + theirs + ", the server's is " + ours
           + " (one server serves one model shape)");
  };
  if (c.model.name != s.model.name)
    return mismatch("model.name", "'" + c.model.name + "'", "'" + s.model.name + "'");
  if (c.model.layers != s.model.layers)
    return mismatch("model.layers", std::to_string(c.model.layers), std::to_string(s.model.layers));
  if (c.model.kv_heads != s.model.kv_heads)
    return mismatch("model.kv_heads", std::to_string(c.model.kv_heads),
                    std::to_string(s.model.kv_heads));
  if (c.model.head_dim != s.model.head_dim)
    return mismatch("model.head_dim", std::to_string(c.model.head_dim),
                    std::to_string(s.model.head_dim));
  if (c.model.kv_dtype != s.model.kv_dtype)
    return mismatch("model.kv_dtype", "'" + c.model.kv_dtype + "'", "'" + s.model.kv_dtype + "'");
  if (c.block_size != s.block_size)
    return mismatch("block_size", std::to_string(c.block_size), std::to_string(s.block_size));
  std::vector<std::string> tiers = {"device"};
  if (s.host_blocks > 0)
    tiers.push_back("host");
  if (s.storage)
    tiers.push_back("storage");
  for (const std::string& t : c.tiers)
    if (std::find(tiers.begin(), tiers.end(), t) == tiers.end())
      return fail(self, x.conn, c.op, c.id, x.since, error_kind::bad_request,
                  "tier '" + t + "' is not configured on this server");
  if (auto bad = attach_tensors(self, c, version))
    return fail(self, x.conn, c.op, c.id, x.since, error_kind::bad_request, *bad);
  uint64_t id = st.next_engine++;
  engine_state& e = st.engines[id];
  e.name = c.name;
  e.conn = x.conn;
  e.last_seen = steady::now();
  e.version = version;
  if (s.off_actor)
    s.off_actor->engine_registered(id, x.conn, version);
  ++st.counters.engines_registered;
  for (auto& o : s.observers)
    o->on_engine(id, e.name, true, 0);
  msgpack::sbuffer buf;
  bool v2 = version >= attach_version;
  bool v3 = version >= engine_tier_version;
  auto m = ok_reply(buf, c.id, 10 + (v2 ? 2 : 0) + (v3 ? 1 : 0));
  m.put("version", version);
  if (v2) {
    m.put("attached", s.gpu != nullptr);
    m.put("verify", s.gpu != nullptr && s.verify);
  }
  if (v3)
    m.put("device_owner", std::string("engine"));
  m.put("engine", id);
  m.put("block_size", s.block_size);
  m.put("layers", s.layers);
  m.put("device_blocks", s.device_blocks);
  m.put("host_blocks", s.host_blocks);
  m.put("tiers", tiers);
  m.put("now_ns", now_ns(self));
  m.put("speed", s.speed);
  put_build(m);
  answer(self, x.conn, c.op, x.since, buf);
}

void do_ping(self_ptr self, ctx& x) {
  const call& c = x.c;
  // Only the connection that registered the engine keeps it alive.
  if (c.engine)
    if (auto it = self->state.engines.find(*c.engine);
        it != self->state.engines.end() && it->second.conn == x.conn)
      it->second.last_seen = x.since;
  msgpack::sbuffer buf;
  ok_reply(buf, c.id, 1).put("now_ns", now_ns(self));
  answer(self, x.conn, c.op, x.since, buf);
}

void do_bye(self_ptr self, ctx& x, engine_state& e, uint64_t engine) {
  uint64_t released = e.requests.size();
  drop_engine(self, engine);
  msgpack::sbuffer buf;
  ok_reply(buf, x.c.id, 1).put("released", released);
  answer(self, x.conn, x.c.op, x.since, buf);
}

void do_stats(self_ptr self, ctx& x) {
  auto& st = self->state;
  self->request(st.controller, caf::infinite, report_atom_v)
    .then(
      [=](const controller_report& cr) {
        self->request(self->state.storage, caf::infinite, report_atom_v)
          .then(
            [=](const storage_report& sr) {
              auto& s2 = self->state;
              stats_answer a;
              a.engines = s2.engines.size();
              for (auto& [id, e] : s2.engines)
                a.requests += e.requests.size();
              std::copy(std::begin(s2.counters.calls), std::end(s2.counters.calls),
                        a.calls.begin());
              std::copy(std::begin(s2.counters.errors), std::end(s2.counters.errors),
                        a.errors.begin());
              a.controller = cr;
              a.storage = sr;
              a.now_ns = now_ns(self);
              msgpack::sbuffer buf;
              encode_stats_reply(buf, x.c.id, a);
              answer(self, x.conn, x.c.op, x.since, buf);
            },
            [=](const caf::error& e) { self->quit(e); });
      },
      [=](const caf::error& e) { self->quit(e); });
}

}  // namespace kvtier::serve
