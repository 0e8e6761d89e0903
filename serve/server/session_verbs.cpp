// The session verbs (docs/protocol.md): hello registers an engine, ping keeps it registered,
// bye releases its requests, stats reads the server's, the controller's and storage's counters.

#include <algorithm>
#include <cstdio>

#include "core/build_info.hpp"
#include "model/messages/report_sum.hpp"
#include "serve/server/server_state.hpp"
#include "serve/wire/session_replies.hpp"
#include "serve/wire/stats_reply.hpp"

namespace kvtier::serve {

namespace {

// The highest version both speak (0: none).
uint32_t common_version(const call& c) {
  uint32_t version = 0;
  for (uint64_t v : c.versions)
    if (v >= protocol_version_min && v <= protocol_version)
      version = std::max(version, static_cast<uint32_t>(v));
  return version;
}

// MLA's latent (docs/protocol.md, hello): each part the engine names against the server's
// model.kv_lora_rank and model.rope_head_dim, then the latent a token caches per layer.
std::optional<model_mismatch_field> latent_mismatch(const model_shape& theirs,
                                                    const model_shape& ours) {
  using mismatch = model_mismatch_field;
  auto number = [](uint32_t v) { return std::to_string(v); };
  bool parts = theirs.kv_lora_rank > 0 && ours.kv_lora_rank > 0;
  if (parts && theirs.kv_lora_rank != ours.kv_lora_rank)
    return mismatch{"model.kv_lora_rank", number(theirs.kv_lora_rank), number(ours.kv_lora_rank)};
  if (parts && theirs.rope_head_dim != ours.rope_head_dim)
    return mismatch{"model.rope_head_dim", number(theirs.rope_head_dim),
                    number(ours.rope_head_dim)};
  if (theirs.latent_dim == ours.latent_dim)
    return std::nullopt;
  std::string made = ours.latent_dim > 0 ? " = model.kv_lora_rank " + number(ours.kv_lora_rank) +
                                             " + model.rope_head_dim " + number(ours.rope_head_dim)
                                         : ", not an MLA model";
  return mismatch{"model.latent_dim", number(theirs.latent_dim), number(ours.latent_dim) + made};
}

}  // namespace

std::optional<model_mismatch_field> model_mismatch(const call& c, const server_settings& s) {
  using mismatch = model_mismatch_field;
  auto quoted = [](const std::string& v) { return "'" + v + "'"; };
  auto number = [](uint32_t v) { return std::to_string(v); };
  if (c.model.name != s.model.name)
    return mismatch{"model.name", quoted(c.model.name), quoted(s.model.name)};
  if (c.model.layers != s.model.layers)
    return mismatch{"model.layers", number(c.model.layers), number(s.model.layers)};
  if (auto m = latent_mismatch(c.model, s.model))
    return m;
  // An MLA block is its latent alone: KV heads and head_dim do not size it (vLLM reports MLA's
  // head size as the latent's, kvtier's model.head_dim is the query head's).
  if (s.model.latent_dim == 0 && c.model.kv_heads != s.model.kv_heads)
    return mismatch{"model.kv_heads", number(c.model.kv_heads), number(s.model.kv_heads)};
  if (s.model.latent_dim == 0 && c.model.head_dim != s.model.head_dim)
    return mismatch{"model.head_dim", number(c.model.head_dim), number(s.model.head_dim)};
  if (c.model.kv_dtype != s.model.kv_dtype)
    return mismatch{"model.kv_dtype", quoted(c.model.kv_dtype), quoted(s.model.kv_dtype)};
  if (c.block_size != s.block_size)
    return mismatch{"block_size", number(c.block_size), number(s.block_size)};
  return std::nullopt;
}

namespace {

std::vector<std::string> tiers_of(const server_settings& s) {
  std::vector<std::string> tiers = {"device"};
  if (s.host_blocks > 0)
    tiers.push_back("host");
  if (s.storage)
    tiers.push_back("storage");
  return tiers;
}

// Registers the engine `c` names at `version` on `x`'s connection; returns its id.
uint64_t register_engine(self_ptr self, const ctx& x, uint32_t version) {
  auto& st = self->state;
  const auto& s = st.settings;
  uint64_t id = st.directory->next_engine++;
  session::session_options o;
  o.owner = version >= engine_tier_version ? session::device_owner::engine
                                           : session::device_owner::kvtier;
  o.block_size = s.block_size;
  o.device_blocks = s.device_blocks;
  engine_state& e = st.engines.try_emplace(id).first->second;
  e.name = x.c.name;
  e.conn = x.to.conn;
  e.last_seen = steady::now();
  e.version = version;
  e.stack = st.stack;
  e.session = session::engine_session(o);
  if (s.off_actor)
    s.off_actor->engine_registered(id, x.to.conn, version, e.stack);
  ++st.counters.engines_registered;
  for (auto& ob : s.observers)
    ob->on_engine(id, e.name, true, 0);
  return id;
}

}  // namespace

void do_hello(self_ptr self, ctx& x) {
  const auto& s = self->state.settings;
  const call& c = x.c;
  // A real server loads into the blocks its own device tier chose (version 2) or the engine
  // named (version 3); either way on the engine's tensors (docs/protocol.md).
  uint32_t version = common_version(c);
  if (version == 0)
    return fail(self, x.to, error_kind::version,
                "no common protocol version: the server speaks "
                  + std::to_string(protocol_version_min) + " to "
                  + std::to_string(protocol_version));
  if (auto m = model_mismatch(c, s))
    return fail(self, x.to, error_kind::model_mismatch,
                m->field + " is " + m->theirs + ", the server's is " + m->ours
                  + " (one server serves one model shape)");
  if (auto d = first_difference(c.config, s.shared)) {
    if (!d->known)
      return fail(self, x.to, error_kind::bad_request,
                  "hello: config key '" + d->key + "' is not one the server shares with "
                  "engines (model.*, cache.*, storage.*, links.*, scheduler.preemption)");
    return fail(self, x.to, error_kind::config_mismatch,
                d->key + " is " + d->theirs + " at the engine, the server's is " + d->ours
                  + ": run the engine and kvtier serve with the same config");
  }
  std::vector<std::string> tiers = tiers_of(s);
  for (const std::string& t : c.tiers)
    if (std::find(tiers.begin(), tiers.end(), t) == tiers.end())
      return fail(self, x.to, error_kind::bad_request,
                  "tier '" + t + "' is not configured on this server");
  if (auto bad = attach_tensors(self, c, version))
    return fail(self, x.to, error_kind::bad_request, *bad);
  hello_answer a;
  a.version = version;
  a.attached = s.gpu != nullptr;
  a.verify = s.gpu != nullptr && s.verify;
  a.owner = session::device_owner::engine;  // on the wire from version 3 only
  a.engine = register_engine(self, x, version);
  a.block_size = s.block_size;
  a.layers = s.layers;
  a.device_blocks = s.device_blocks;
  a.host_blocks = s.host_blocks;
  a.tiers = std::move(tiers);
  a.now_ns = now_ns(self);
  a.speed = s.speed;
  a.kvtier = this_build();
  msgpack::sbuffer buf;
  encode_hello_reply(buf, c.id, a);
  answer(self, x.to, buf);
}

void do_ping(self_ptr self, ctx& x) {
  const call& c = x.c;
  // Only the connection that registered the engine keeps it alive.
  if (c.engine)
    if (auto it = self->state.engines.find(*c.engine);
        it != self->state.engines.end() && it->second.conn == x.to.conn)
      it->second.last_seen = x.to.since;
  msgpack::sbuffer buf;
  encode_ping_reply(buf, c.id, now_ns(self));
  answer(self, x.to, buf);
}

void do_bye(self_ptr self, ctx& x, engine_state& e, uint64_t engine) {
  uint64_t released = e.session.size();
  drop_engine(self, engine);
  msgpack::sbuffer buf;
  encode_bye_reply(buf, x.c.id, released);
  answer(self, x.to, buf);
}

namespace {

// The server's own invariants beside the controller's: every engine session's, and the
// controller answers a session refused. Reported as the controller's violations, which `stats`
// carries (docs/protocol.md); the first message goes to stderr.
uint64_t session_violations(self_ptr self) {
  auto& st = self->state;
  invariant_report report;
  for (const auto& [id, e] : st.engines)
    e.session.check(report);
  if (!report.ok())
    std::fprintf(stderr, "kvtier serve: internal error: %s\n", report.messages.front().c_str());
  return report.violations + st.session_faults;
}

// Every shard's part (stats_part) and every stack's report, summed.
struct gathered_stats {
  stats_answer answer;
  size_t shards_left = 0;
  size_t stacks_left = 0;
};

void add_part(stats_answer& a, const std::vector<uint64_t>& part) {
  KVTIER_ASSERT(part.size() == 3 + verb_count + error_kind_count);
  a.engines += part[0];
  a.requests += part[1];
  a.controller.invariant_violations += part[2];
  for (size_t i = 0; i < verb_count; ++i)
    a.calls[i] += part[3 + i];
  for (size_t i = 0; i < error_kind_count; ++i)
    a.errors[i] += part[3 + verb_count + i];
}

void send_stats(self_ptr self, const ctx& x, stats_answer& a) {
  auto& st = self->state;
  a.now_ns = now_ns(self);
  if (st.settings.refused_connections)
    a.refused_connections = st.settings.refused_connections->load();
  msgpack::sbuffer buf;
  encode_stats_reply(buf, x.c.id, a);
  answer(self, x.to, buf);
}

// Storage's report last, once every shard and stack has answered.
void when_gathered(self_ptr self, const ctx& x, const std::shared_ptr<gathered_stats>& all) {
  if (all->shards_left > 0 || all->stacks_left > 0)
    return;
  self->request(self->state.storage, caf::infinite, report_atom_v)
    .then(
      [=](const storage_report& sr) {
        all->answer.storage = sr;
        send_stats(self, x, all->answer);
      },
      [=](const caf::error& e) { self->quit(e); });
}

}  // namespace

std::vector<uint64_t> stats_part(self_ptr self) {
  auto& st = self->state;
  std::vector<uint64_t> part = {st.engines.size(), 0, session_violations(self)};
  for (auto& [id, e] : st.engines)
    part[1] += e.session.size();
  part.insert(part.end(), std::begin(st.counters.calls), std::end(st.counters.calls));
  part.insert(part.end(), std::begin(st.counters.errors), std::end(st.counters.errors));
  return part;
}

// Every shard's counters and every stack's report summed, as a cluster replay sums its
// instances' (model/messages/report_sum.hpp), then storage's. The invariant violations the
// shards report join the stacks' controllers'. This shard's part comes through its mailbox as
// the others' do, after the calls it has already taken.
void do_stats(self_ptr self, ctx& x) {
  auto& st = self->state;
  auto all = std::make_shared<gathered_stats>();
  all->shards_left = st.shards->size();
  all->stacks_left = st.controllers.size();
  for (const caf::actor& shard : *st.shards)
    self->request(shard, caf::infinite, report_atom_v, caf::get_atom_v)
      .then(
        [=](const std::vector<uint64_t>& part) {
          add_part(all->answer, part);
          --all->shards_left;
          when_gathered(self, x, all);
        },
        [=](const caf::error& e) { self->quit(e); });
  for (const cache_controller_actor& controller : st.controllers)
    self->request(controller, caf::infinite, report_atom_v)
      .then(
        [=](const controller_report& cr) {
          all->answer.controller += cr;  // adds violations: the shards' come in either order
          --all->stacks_left;
          when_gathered(self, x, all);
        },
        [=](const caf::error& e) { self->quit(e); });
}

}  // namespace kvtier::serve
