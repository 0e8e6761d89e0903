#include "serve/server_actor.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <unordered_map>

#include "model/storage/storage_index.hpp"
#include "gpu/bench_blocks.hpp"
#include "serve/block_names.hpp"
#include "serve/encode.hpp"

namespace kvtier::serve {

namespace {

using steady = std::chrono::steady_clock;

enum class req_state : uint8_t { loading, waiting, admitting, running };

struct waiter {
  uint64_t conn = 0;
  uint64_t id = 0;
  steady::time_point since;
};

struct live_request {
  request_id global = 0;
  req_state state = req_state::loading;
  bool orphan = false;  // its engine left while it loaded: finished once it is ready
  uint32_t prefetched = 0;
  uint32_t available = 0;
  uint32_t prompt_blocks = 0;  // for the observers' hit counts
  std::vector<waiter> waiters;
};

struct engine_state {
  std::string name;
  uint64_t conn = 0;
  steady::time_point last_seen;
  uint64_t next_step = 1;  // the shorthands' step numbers
  std::unordered_map<uint64_t, live_request> requests;
};

struct owner_ref {
  uint64_t engine = 0;
  uint64_t req = 0;
};

struct server_state {
  static inline const char* name = "serve";
  server_settings settings;
  cache_controller_actor controller;
  storage_actor storage;
  reply_sink sink;
  serve_counters counters;
  std::map<uint64_t, engine_state> engines;
  std::unordered_map<request_id, owner_ref> owners;  // controller id -> engine's request
  uint64_t next_engine = 1;
  request_id next_request = 1;
  uint64_t next_step = 1;  // the controller's step numbers, unique across engines
  bool stopping = false;
  // Real mode: the tensors attached (their hello's), swap-ins submitted whose step reply has
  // not gone yet, and step replies waiting for their swap-in's submission; by transfer id.
  std::optional<attach_request> attached;
  std::unordered_map<uint64_t, swap_in_signal> signals;
  std::unordered_map<uint64_t, std::function<void(const swap_in_signal&)>> parked;
};

using self_ptr = caf::stateful_actor<server_state>*;

int64_t now_ns(self_ptr self) {
  auto& s = self->state.settings;
  auto wall = std::chrono::duration_cast<std::chrono::nanoseconds>(self->clock().now() - s.epoch);
  return static_cast<int64_t>(static_cast<double>(wall.count()) * s.speed);
}

// -- replies ------------------------------------------------------------------------------------

void answer(self_ptr self, uint64_t conn, verb op, steady::time_point since, msgpack::sbuffer& buf,
            std::optional<error_kind> err = std::nullopt) {
  auto& st = self->state;
  ++st.counters.calls[static_cast<int>(op)];
  if (err)
    ++st.counters.errors[static_cast<int>(*err)];
  int64_t latency = std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now() - since)
                      .count();
  for (auto& o : st.settings.observers)
    o->on_call(op, latency, err);
  st.sink(conn, std::string(buf.data(), buf.size()));
}

void fail(self_ptr self, uint64_t conn, verb op, uint64_t id, steady::time_point since,
          error_kind kind, const std::string& message) {
  std::string bytes = encode_error(id, error_name(kind), message);
  msgpack::sbuffer buf;
  buf.write(bytes.data(), bytes.size());
  answer(self, conn, op, since, buf, kind);
}

// {"id", "ok": true, + n more}
map_writer ok_reply(msgpack::sbuffer& buf, uint64_t id, uint32_t fields) {
  map_writer w(buf, fields + 2);
  w.put("id", id);
  w.put("ok", true);
  return w;
}

// -- prompts ------------------------------------------------------------------------------------

std::optional<std::string> blocks_of(self_ptr self, const prompt& p,
                                     std::vector<cache_block>& out) {
  const auto& s = self->state.settings;
  out.clear();
  if (p.kind == prompt::form::tokens) {
    uint64_t full = p.tokens.size() / s.block_size;
    if (full > s.max_blocks_per_request)
      return "the prompt has " + std::to_string(full) + " blocks, beyond "
             + std::to_string(s.max_blocks_per_request);
    block_hash parent = 0;
    for (uint64_t i = 0; i < full; ++i) {
      parent = hash_token_block(parent, p.tokens.data() + i * s.block_size, s.block_size,
                                p.extra_keys.data(), p.extra_keys.size());
      out.push_back({parent, s.block_size});
    }
    name_engine_blocks(out);
    return std::nullopt;
  }
  if (p.blocks.size() > s.max_blocks_per_request)
    return "the prompt has " + std::to_string(p.blocks.size()) + " blocks, beyond "
           + std::to_string(s.max_blocks_per_request);
  out = p.blocks;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].tokens == 0)
      out[i].tokens = s.block_size;
    else if (out[i].tokens > s.block_size || (out[i].tokens < s.block_size && i + 1 < out.size()))
      return "block " + std::to_string(i) + " holds " + std::to_string(out[i].tokens)
             + " tokens: blocks hold " + std::to_string(s.block_size)
             + ", only the last may hold fewer";
  }
  name_engine_blocks(out);
  return std::nullopt;
}

// -- engines and their requests ------------------------------------------------------------------

void send_commit(self_ptr self, commit c, std::function<void(const grant&)> then);

// Releases every request of `e` (as finished); ones still loading are finished once ready.
uint64_t release_engine(self_ptr self, engine_state& e) {
  auto& st = self->state;
  commit c;
  uint64_t released = 0;
  for (auto& [req, r] : e.requests) {
    ++released;
    if (r.state == req_state::loading) {
      r.orphan = true;
      st.owners[r.global].engine = 0;  // no engine: finished when ready
      continue;
    }
    c.finished.push_back(r.global);
    st.owners.erase(r.global);
  }
  st.counters.requests_released += released;
  if (!c.finished.empty())
    send_commit(self, std::move(c), [](const grant&) {});
  return released;
}

void drop_engine(self_ptr self, uint64_t engine) {
  auto& st = self->state;
  auto it = st.engines.find(engine);
  if (it == st.engines.end())
    return;
  uint64_t released = release_engine(self, it->second);
  for (auto& o : st.settings.observers)
    o->on_engine(engine, it->second.name, false, released);
  st.engines.erase(it);
}

// Answered by the controller when its blocks are released; a grant the engine no longer waits
// for is dropped.
void send_commit(self_ptr self, commit c, std::function<void(const grant&)> then) {
  c.step = self->state.next_step++;
  self->request(self->state.controller, caf::infinite, std::move(c))
    .then([then](const grant& g) { then(g); },
          // No controller: the server cannot serve; it stops with it.
          [=](const caf::error& e) { self->quit(e); });
}

void on_ready(self_ptr self, const ready& rd) {
  auto& st = self->state;
  auto o = st.owners.find(rd.req);
  if (o == st.owners.end())
    return;
  if (o->second.engine == 0) {  // its engine left while it loaded
    st.owners.erase(o);
    commit c;
    c.finished.push_back(rd.req);
    send_commit(self, std::move(c), [](const grant&) {});
    return;
  }
  auto& e = st.engines.at(o->second.engine);
  live_request& r = e.requests.at(o->second.req);
  r.state = req_state::waiting;
  r.prefetched = rd.prefetched_blocks;
  r.available = rd.available_blocks;
  for (const waiter& w : r.waiters) {
    msgpack::sbuffer buf;
    auto m = ok_reply(buf, w.id, 2);
    m.put("prefetched_blocks", r.prefetched);
    m.put("available_blocks", r.available);
    answer(self, w.conn, verb::wait, w.since, buf);
  }
  r.waiters.clear();
}

// -- verbs --------------------------------------------------------------------------------------

struct ctx {
  uint64_t conn;
  steady::time_point since;
  call c;
};

// Real mode: the engine's tensors are opened at its first hello; later hellos (a reconnect, a
// second link of the same engine) must name the same ones. Returns why the hello is refused.
std::optional<std::string> attach_tensors(self_ptr self, const call& c, uint32_t version) {
  auto& st = self->state;
  const auto& s = st.settings;
  const attach_request& t = c.tensors;
  if (!s.gpu) {
    if (t.present)
      return std::string("this server models the device (kvtier serve without --backend cuda): "
                         "it cannot attach an engine's tensors; start it with --backend cuda, "
                         "or leave 'tensors' out");
    return std::nullopt;
  }
  if (!t.present)
    return std::string("kvtier serve --backend cuda runs its copies on the engine's KV tensors: "
                       "hello must carry 'tensors' (protocol version 2)");
  if (version < attach_version)
    return "'tensors' needs protocol version " + std::to_string(attach_version)
           + "; the versions offered allow " + std::to_string(version);
  if (t.layer_handles.size() != s.layers)
    return "tensors.layers has " + std::to_string(t.layer_handles.size())
           + " entries; the model has " + std::to_string(s.layers) + " layers";
  if (t.device_blocks != s.device_blocks)
    return "tensors.device_blocks is " + std::to_string(t.device_blocks)
           + "; the server's device tier holds " + std::to_string(s.device_blocks)
           + " blocks (cache.device_tokens / cache.block_size): size the tensors alike";
  if (t.event_slots == 0 || t.event_slots > 64)
    return "tensors.event_slots must be in [1, 64], got " + std::to_string(t.event_slots);
  if (t.events.size() != uint64_t{t.event_slots} * s.layers)
    return "tensors.events has " + std::to_string(t.events.size()) + " handles; event_slots x "
           "layers is " + std::to_string(uint64_t{t.event_slots} * s.layers);
  if (st.attached) {
    const attach_request& a = *st.attached;
    if (a.layer_handles != t.layer_handles || a.layer_offsets != t.layer_offsets
        || a.events != t.events || a.event_slots != t.event_slots)
      return std::string("this server is attached to another engine's tensors (one engine's "
                         "tensors per server); restart it to attach these");
    return std::nullopt;
  }
  engine_tensors et;
  for (size_t l = 0; l < t.layer_handles.size(); ++l) {
    gpu::layer_tensor_handle h;
    std::copy(t.layer_handles[l].begin(), t.layer_handles[l].end(), h.handle.begin());
    h.offset = t.layer_offsets[l];
    et.layers.push_back(h);
  }
  for (const ipc_bytes& e : t.events) {
    gpu::ipc_handle h;
    std::copy(e.begin(), e.end(), h.begin());
    et.events.push_back(h);
  }
  et.event_slots = t.event_slots;
  try {
    s.gpu->attach(et);
  } catch (const std::exception& e) {
    return std::string("cannot attach the engine's tensors: ") + e.what();
  }
  st.attached = t;
  return std::nullopt;
}

void do_hello(self_ptr self, ctx& x) {
  auto& st = self->state;
  const auto& s = st.settings;
  const call& c = x.c;
  uint32_t version = 0;
  for (uint64_t v : c.versions)
    if (v >= protocol_version_min && v <= protocol_version)
      version = std::max(version, static_cast<uint32_t>(v));
  if (version == 0)
    return fail(self, x.conn, c.op, c.id, x.since, error_kind::version,
                "no common protocol version: the server speaks "
                  + std::to_string(protocol_version_min) + " to "
                  + std::to_string(protocol_version));
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
  ++st.counters.engines_registered;
  for (auto& o : s.observers)
    o->on_engine(id, e.name, true, 0);
  msgpack::sbuffer buf;
  bool v2 = version >= attach_version;
  auto m = ok_reply(buf, c.id, 9 + (v2 ? 2 : 0));
  m.put("version", version);
  if (v2) {
    m.put("attached", s.gpu != nullptr);
    m.put("verify", s.gpu != nullptr && s.verify);
  }
  m.put("engine", id);
  m.put("block_size", s.block_size);
  m.put("layers", s.layers);
  m.put("device_blocks", s.device_blocks);
  m.put("host_blocks", s.host_blocks);
  m.put("tiers", tiers);
  m.put("now_ns", now_ns(self));
  m.put("speed", s.speed);
  answer(self, x.conn, c.op, x.since, buf);
}

void do_lookup(self_ptr self, ctx& x) {
  std::vector<cache_block> blocks;
  if (auto bad = blocks_of(self, x.c.text, blocks))
    return fail(self, x.conn, x.c.op, x.c.id, x.since, error_kind::bad_request, *bad);
  auto reply = [=](const prefix_hit& h, uint32_t storage_blocks, uint64_t storage_tokens) {
    for (auto& o : self->state.settings.observers)
      o->on_hits(verb::lookup, static_cast<uint32_t>(blocks.size()), h.device_blocks,
                 h.host_blocks, storage_blocks);
    msgpack::sbuffer buf;
    auto m = ok_reply(buf, x.c.id, 6);
    m.put("device_blocks", h.device_blocks);
    m.put("host_blocks", h.host_blocks);
    m.put("storage_blocks", storage_blocks);
    m.put("device_tokens", h.device_tokens);
    m.put("host_tokens", h.host_tokens);
    m.put("storage_tokens", storage_tokens);
    answer(self, x.conn, x.c.op, x.since, buf);
  };
  bool storage = self->state.settings.storage;
  uint64_t ns = self->state.settings.storage_namespace;
  self->request(self->state.controller, caf::infinite, prefix_lookup{blocks})
    .then(
      [=](const prefix_hit& h) {
        size_t from = size_t{h.device_blocks} + h.host_blocks;
        if (!storage || from >= blocks.size())
          return reply(h, 0, 0);
        exists_query q;
        for (size_t i = from; i < blocks.size(); ++i)
          q.keys.push_back(make_storage_key(ns, blocks[i].hash));
        self->request(self->state.storage, caf::infinite, std::move(q))
          .then(
            [=](const exists_reply& r) {
              uint64_t tokens = 0;
              for (size_t i = from; i < from + r.leading && i < blocks.size(); ++i)
                tokens += blocks[i].tokens;
              reply(h, r.leading, tokens);
            },
            // Storage that cannot answer holds nothing, as for the controller's own lookups.
            [=](const caf::error&) { reply(h, 0, 0); });
      },
      [=](const caf::error& e) { self->quit(e); });
}

void do_allocate(self_ptr self, ctx& x, engine_state& e, uint64_t engine) {
  auto& st = self->state;
  const call& c = x.c;
  auto found = e.requests.find(c.req);
  auto reply_state = [=](uint64_t id, const live_request& r) {
    msgpack::sbuffer buf;
    bool ready = r.state != req_state::loading;
    auto m = ok_reply(buf, id, ready ? 3 : 1);
    m.put_str("state", ready ? "ready" : "pending");
    if (ready) {
      m.put("prefetched_blocks", r.prefetched);
      m.put("available_blocks", r.available);
    }
    answer(self, x.conn, verb::allocate, x.since, buf);
  };
  if (found != e.requests.end()) {
    if (c.text.kind != prompt::form::none)
      return fail(self, x.conn, c.op, c.id, x.since, error_kind::bad_request,
                  "request " + std::to_string(c.req) + " is already allocated (ask again without "
                  "a prompt)");
    return reply_state(c.id, found->second);
  }
  if (c.text.kind == prompt::form::none)
    return fail(self, x.conn, c.op, c.id, x.since, error_kind::malformed,
                "'allocate' of a new request needs 'tokens', 'hashes' or 'blocks'");
  std::vector<cache_block> blocks;
  if (auto bad = blocks_of(self, c.text, blocks))
    return fail(self, x.conn, c.op, c.id, x.since, error_kind::bad_request, *bad);
  request_id global = st.next_request++;
  live_request& r = e.requests[c.req];
  r.global = global;
  r.prompt_blocks = static_cast<uint32_t>(blocks.size());
  st.owners[global] = {engine, c.req};
  self->request(st.controller, caf::infinite, arrival{global, std::move(blocks)})
    .then([=](const ready& rd) { on_ready(self, rd); },
          [=](const caf::error& err) { self->quit(err); });
  // The controller answers an arrival at once unless storage must be asked or loaded from; a
  // lookup sent behind it is answered after it, so its answer tells which case this is.
  uint64_t req = c.req, id = c.id;
  self->request(st.controller, caf::infinite, prefix_lookup{})
    .then(
      [=](const prefix_hit&) {
        auto& s2 = self->state;
        auto en = s2.engines.find(engine);
        if (en == s2.engines.end())
          return;  // the engine left: nobody waits for the answer
        auto rq = en->second.requests.find(req);
        if (rq == en->second.requests.end())
          return fail(self, x.conn, verb::allocate, id, x.since, error_kind::bad_request,
                      "request " + std::to_string(req)
                        + " was finished before its allocation was answered");
        reply_state(id, rq->second);
      },
      [=](const caf::error& err) { self->quit(err); });
}

void do_wait(self_ptr self, ctx& x, engine_state& e) {
  auto it = e.requests.find(x.c.req);
  if (it == e.requests.end())
    return fail(self, x.conn, x.c.op, x.c.id, x.since, error_kind::bad_request,
                "request " + std::to_string(x.c.req) + " is not allocated");
  live_request& r = it->second;
  if (r.state == req_state::loading) {
    r.waiters.push_back({x.conn, x.c.id, x.since});
    return;
  }
  msgpack::sbuffer buf;
  auto m = ok_reply(buf, x.c.id, 2);
  m.put("prefetched_blocks", r.prefetched);
  m.put("available_blocks", r.available);
  answer(self, x.conn, x.c.op, x.since, buf);
}

void do_probe(self_ptr self, ctx& x, engine_state& e) {
  probe p = x.c.probe;
  for (auto* list : {&p.candidates, &p.victims})
    for (uint64_t& req : *list) {
      auto it = e.requests.find(req);
      if (it == e.requests.end())
        return fail(self, x.conn, x.c.op, x.c.id, x.since, error_kind::bad_request,
                    "request " + std::to_string(req) + " is not allocated");
      req = it->second.global;
    }
  std::unordered_map<request_id, uint64_t> back;
  for (size_t i = 0; i < p.candidates.size(); ++i)
    back[p.candidates[i]] = x.c.probe.candidates[i];
  self->request(self->state.controller, caf::infinite, std::move(p))
    .then(
      [=](const probe_reply& r) {
        msgpack::sbuffer buf;
        auto m = ok_reply(buf, x.c.id, 4);
        m.put("step", x.c.probe.step);
        m.put("available_blocks", r.available_blocks);
        auto& pk = m.key("matches");
        pk.pack_array(static_cast<uint32_t>(r.matches.size()));
        for (const candidate_match& cm : r.matches) {
          map_writer one(buf, 6);
          one.put("req", back.at(cm.req));
          one.put("device_blocks", cm.device_blocks);
          one.put("host_blocks", cm.host_blocks);
          one.put("device_tokens", cm.device_tokens);
          one.put("host_tokens", cm.host_tokens);
          one.put("idle_device_blocks", cm.idle_device_blocks);
        }
        m.put("victim_frees", r.victim_frees);
        answer(self, x.conn, x.c.op, x.since, buf);
      },
      [=](const caf::error& err) { self->quit(err); });
}

// Checks a step against the requests' states, applying the transitions in the controller's
// order; on success `c` names the controller's ids.
std::optional<std::string> check_step(engine_state& e, commit& c) {
  std::unordered_map<uint64_t, req_state> after;
  auto state_of = [&](uint64_t req) -> std::optional<req_state> {
    if (auto a = after.find(req); a != after.end())
      return a->second;
    auto it = e.requests.find(req);
    if (it == e.requests.end())
      return std::nullopt;
    return it->second.state;
  };
  auto name = [](uint64_t req) { return "request " + std::to_string(req); };
  auto global = [&](uint64_t req) { return e.requests.at(req).global; };
  constexpr auto gone = static_cast<req_state>(255);
  for (token_mark& m : c.computed) {
    auto s = state_of(m.req);
    if (s != req_state::running)
      return name(m.req) + " in 'computed' is not running";
    m.req = global(m.req);
  }
  for (uint64_t& req : c.finished) {
    auto s = state_of(req);
    if (!s || *s == gone)
      return name(req) + " in 'finished' is not allocated";
    if (*s == req_state::loading)
      return name(req) + " in 'finished' is still loading from storage ('wait' first)";
    if (*s == req_state::admitting)
      return name(req) + " in 'finished' has an admission not yet answered";
    after[req] = gone;
    req = global(req);
  }
  for (token_mark& m : c.preempted) {
    if (state_of(m.req) != req_state::running)
      return name(m.req) + " in 'preempted' is not running";
    after[m.req] = req_state::waiting;
    m.req = global(m.req);
  }
  for (token_mark& m : c.grows) {
    if (state_of(m.req) != req_state::running)
      return name(m.req) + " in 'grows' is not running";
    m.req = global(m.req);
  }
  for (token_mark& m : c.admits) {
    auto s = state_of(m.req);
    if (s != req_state::waiting)
      return name(m.req) + " in 'admits' is not waiting (allocated, loaded and not running)";
    if (m.tokens == 0)
      return name(m.req) + " is admitted for 0 tokens";
    after[m.req] = req_state::admitting;
    m.req = global(m.req);
  }
  return std::nullopt;
}

void send_step_reply(self_ptr self, const ctx& x, uint64_t engine_step, const grant& g,
                     const std::vector<uint64_t>& engine_reqs, const swap_in_signal* sig);

// Real mode: the device blocks a reply names, each as [device block id, the hash its verify
// pattern is drawn from].
void pack_blocks(msgpack::packer<msgpack::sbuffer>& out,
                 const std::vector<gpu::block_pattern>& blocks) {
  out.pack_array(static_cast<uint32_t>(blocks.size()));
  for (const gpu::block_pattern& b : blocks) {
    out.pack_array(2);
    out.pack(b.block);
    out.pack(b.hash);
  }
}

void do_step(self_ptr self, ctx& x, engine_state& e, uint64_t engine) {
  auto& st = self->state;
  const call& c = x.c;
  commit work = c.step;
  uint64_t engine_step = c.step.step;
  switch (c.op) {
    case verb::commit:
    case verb::save: work.computed = {{c.req, c.tokens}}; break;
    case verb::preempt: work.preempted = {{c.req, c.tokens}}; break;
    case verb::finish:
    case verb::free: work.finished = {c.req}; break;
    default: break;
  }
  if (c.op != verb::step)
    engine_step = e.next_step++;
  commit original = work;
  if (auto bad = check_step(e, work))
    return fail(self, x.conn, c.op, c.id, x.since, error_kind::bad_request, *bad);
  // The transitions the controller applies now, before its grant comes back.
  for (uint64_t req : original.finished) {
    st.owners.erase(e.requests.at(req).global);
    e.requests.erase(req);
  }
  for (const token_mark& m : original.preempted)
    e.requests.at(m.req).state = req_state::waiting;
  for (const token_mark& m : original.admits)
    e.requests.at(m.req).state = req_state::admitting;
  send_commit(self, std::move(work), [=](const grant& g) {
    auto& s2 = self->state;
    auto en = s2.engines.find(engine);
    // Settle the admissions first: the engine's requests change state even if it left.
    std::vector<uint64_t> engine_reqs(g.admits.size());
    for (size_t i = 0; i < g.admits.size(); ++i) {
      auto o = s2.owners.find(g.admits[i].req);
      engine_reqs[i] = o == s2.owners.end() ? 0 : o->second.req;
      if (o == s2.owners.end() || en == s2.engines.end())
        continue;
      auto rq = en->second.requests.find(o->second.req);
      if (rq != en->second.requests.end() && rq->second.state == req_state::admitting)
        rq->second.state = g.admits[i].admitted ? req_state::running : req_state::waiting;
      if (rq != en->second.requests.end() && g.admits[i].admitted)
        for (auto& ob : s2.settings.observers)
          ob->on_hits(verb::step, rq->second.prompt_blocks, g.admits[i].device_blocks,
                      g.admits[i].host_blocks, g.admits[i].storage_blocks);
    }
    auto reply = [=](const swap_in_signal* sig) {
      send_step_reply(self, x, engine_step, g, engine_reqs, sig);
    };
    if (g.swap_in == 0 || !s2.settings.gpu)
      return reply(nullptr);
    // Real mode: the reply tells the engine which event slot covers the swap-in, so it goes
    // once the swap-in is submitted and those events are recorded.
    if (auto sg = s2.signals.find(g.swap_in); sg != s2.signals.end()) {
      swap_in_signal sig = std::move(sg->second);
      s2.signals.erase(sg);
      return reply(&sig);
    }
    s2.parked.emplace(g.swap_in, [reply](const swap_in_signal& sig) { reply(&sig); });
  });
}

void send_step_reply(self_ptr self, const ctx& x, uint64_t engine_step, const grant& g,
                     const std::vector<uint64_t>& engine_reqs, const swap_in_signal* sig) {
  auto& s2 = self->state;
  const call& c = x.c;
  bool real = s2.settings.gpu != nullptr;
  msgpack::sbuffer buf;
  auto m = ok_reply(buf, c.id, 6 + (real ? 1 : 0));
  m.put("step", engine_step);
  auto& pk = m.key("admits");
  pk.pack_array(static_cast<uint32_t>(g.admits.size()));
  for (size_t i = 0; i < g.admits.size(); ++i) {
    const admit_result& a = g.admits[i];
    map_writer one(buf, 8);
    one.put("req", engine_reqs[i]);
    one.put("admitted", a.admitted);
    one.put("device_blocks", a.device_blocks);
    one.put("host_blocks", a.host_blocks);
    one.put("storage_blocks", a.storage_blocks);
    one.put("device_tokens", a.device_tokens);
    one.put("host_tokens", a.host_tokens);
    one.put("storage_tokens", a.storage_tokens);
  }
  auto& fg = m.key("failed_grows");
  fg.pack_array(static_cast<uint32_t>(g.failed_grows.size()));
  for (request_id r : g.failed_grows) {
    auto o = s2.owners.find(r);
    fg.pack(o == s2.owners.end() ? uint64_t{0} : o->second.req);
  }
  m.put("available_blocks", g.available_blocks);
  m.put("layer_ready_ns", g.layer_ready_ns);
  m.put("now_ns", now_ns(self));
  if (real) {
    auto& sw = m.key("swap_in");
    if (sig == nullptr) {
      sw.pack_nil();
    } else {
      map_writer one(buf, 3);
      one.put("slot", sig->slot);
      one.put("layers", s2.settings.layers);
      pack_blocks(one.key("blocks"), sig->blocks);
    }
  }
  answer(self, x.conn, c.op, x.since, buf);
}

// Real mode, before any request: loads host blocks into the engine's tensors and times it on the
// device (docs/protocol.md, bench_swap). It overwrites device and host blocks, so it runs only
// while no request was ever allocated.
void do_bench_swap(self_ptr self, ctx& x) {
  auto& st = self->state;
  const auto& s = st.settings;
  const call& c = x.c;
  auto refuse = [&](const std::string& why) {
    fail(self, x.conn, c.op, c.id, x.since, error_kind::bad_request, why);
  };
  if (st.next_request != 1 || st.next_step != 1)
    return refuse("bench_swap overwrites device and host blocks: it runs only before the "
                  "server's first allocate and step");
  if (!s.gpu || !s.gpu->attached())
    return refuse("bench_swap needs an attached engine (kvtier serve --backend cuda)");
  uint32_t most = std::min(s.device_blocks, s.host_blocks);
  if (c.blocks == 0 || c.blocks > most)
    return refuse("'blocks' must be in [1, " + std::to_string(most)
                  + "] (the smaller of the device and host tiers)");
  // Host blocks [0, n) into device blocks placed as `kvtier bench transfer` places its H2D
  // targets (shuffled, half of them in runs of up to 32), so that the two figures compare.
  gpu::bench_options placing;
  std::vector<uint32_t> ids =
    gpu::bench::shuffled_runs(placing.seed, s.device_blocks, placing.run_share,
                              placing.run_length_max);
  constexpr uint64_t hash_base = 0x62656e6368000000;  // "bench": any fixed base will do
  std::vector<gpu::block_pattern> targets;
  for (uint32_t i = 0; i < c.blocks; ++i)
    targets.push_back({ids[i], hash_base + i});
  swap_bench_result r = s.gpu->bench_swap(targets, c.repeats);
  msgpack::sbuffer buf;
  auto m = ok_reply(buf, c.id, 5);
  m.put("bytes", r.bytes);
  m.put("gbps", r.gbps);
  m.put("slot", r.slot);
  m.put("layers", s.layers);
  pack_blocks(m.key("blocks"), targets);
  answer(self, x.conn, c.op, x.since, buf);
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
              uint64_t live = 0;
              for (auto& [id, e] : s2.engines)
                live += e.requests.size();
              msgpack::sbuffer buf;
              auto m = ok_reply(buf, x.c.id, 7);
              m.put("engines", static_cast<uint64_t>(s2.engines.size()));
              m.put("requests", live);
              auto& calls = m.key("calls");
              calls.pack_map(verb_count);
              for (int i = 0; i < verb_count; ++i) {
                calls.pack(std::string(verb_name(static_cast<verb>(i))));
                calls.pack(s2.counters.calls[i]);
              }
              auto& errors = m.key("errors");
              errors.pack_map(error_kind_count);
              for (int i = 0; i < error_kind_count; ++i) {
                errors.pack(std::string(error_name(static_cast<error_kind>(i))));
                errors.pack(s2.counters.errors[i]);
              }
              m.key("controller");
              map_writer c(buf, 12);
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
              m.key("storage");
              map_writer sw(buf, 5);
              sw.put("stored", sr.stored);
              sw.put("capacity", sr.capacity);
              sw.put("rebuilt", sr.rebuilt);
              sw.put("misses", sr.misses);
              sw.put_str("backend", sr.backend);
              m.put("now_ns", now_ns(self));
              answer(self, x.conn, x.c.op, x.since, buf);
            },
            [=](const caf::error& e) { self->quit(e); });
      },
      [=](const caf::error& e) { self->quit(e); });
}

void on_call(self_ptr self, inbound_call& in) {
  auto& st = self->state;
  const uint64_t conn = in.conn;
  if (in.oversize != 0)
    return fail(self, conn, verb::ping, 0, in.since, error_kind::too_large,
                "the message holds " + std::to_string(in.oversize) + " bytes, beyond "
                  "serve.max_message_bytes (" + std::to_string(st.settings.max_message_bytes)
                  + ")");
  if (in.error)
    return fail(self, conn, in.c.op, in.c.id, in.since, in.error->kind, in.error->message);
  ctx x{conn, in.since, std::move(in.c)};
  const call& c = x.c;
  if (!st.settings.token.empty() && c.token != st.settings.token)
    return fail(self, conn, c.op, c.id, x.since, error_kind::unauthorized,
                c.token ? "wrong token" : "this server needs a 'token'");
  if (st.stopping && c.op != verb::ping && c.op != verb::stats)
    return fail(self, conn, c.op, c.id, x.since, error_kind::shutting_down,
                "the server is shutting down");
  if (c.op == verb::hello)
    return do_hello(self, x);
  if (c.op == verb::ping) {
    if (c.engine)
      if (auto it = st.engines.find(*c.engine); it != st.engines.end())
        it->second.last_seen = x.since;
    msgpack::sbuffer buf;
    ok_reply(buf, c.id, 1).put("now_ns", now_ns(self));
    return answer(self, conn, c.op, x.since, buf);
  }
  if (c.op == verb::stats)
    return do_stats(self, x);
  if (!c.engine)
    return fail(self, conn, c.op, c.id, x.since, error_kind::malformed,
                std::string("'") + verb_name(c.op) + "' needs 'engine'");
  auto it = st.engines.find(*c.engine);
  if (it == st.engines.end())
    return fail(self, conn, c.op, c.id, x.since, error_kind::not_registered,
                "engine " + std::to_string(*c.engine)
                  + " is not registered (say hello first; an engine silent for "
                    "serve.client_timeout_s is dropped)");
  engine_state& e = it->second;
  e.last_seen = x.since;
  e.conn = conn;
  switch (c.op) {
    case verb::lookup: return do_lookup(self, x);
    case verb::allocate: return do_allocate(self, x, e, *c.engine);
    case verb::wait: return do_wait(self, x, e);
    case verb::probe: return do_probe(self, x, e);
    case verb::bench_swap: return do_bench_swap(self, x);
    case verb::bye: {
      uint64_t released = e.requests.size();
      drop_engine(self, *c.engine);
      msgpack::sbuffer buf;
      ok_reply(buf, c.id, 1).put("released", released);
      return answer(self, conn, c.op, x.since, buf);
    }
    default: return do_step(self, x, e, *c.engine);
  }
}

void sweep_timeouts(self_ptr self) {
  auto& st = self->state;
  auto limit = std::chrono::duration_cast<steady::duration>(
    std::chrono::duration<double>(st.settings.client_timeout_s));
  auto now = steady::now();
  std::vector<uint64_t> late;
  for (auto& [id, e] : st.engines) {
    bool waiting = false;  // a call parked in `wait` is not silence
    for (auto& [req, r] : e.requests)
      waiting = waiting || !r.waiters.empty();
    if (!waiting && now - e.last_seen > limit)
      late.push_back(id);
  }
  for (uint64_t id : late) {
    ++st.counters.engines_timed_out;
    drop_engine(self, id);
  }
}

caf::behavior server_behavior(caf::stateful_actor<server_state>* self, server_settings settings,
                              cache_controller_actor controller, storage_actor storage,
                              reply_sink sink) {
  auto& st = self->state;
  st.settings = std::move(settings);
  st.controller = std::move(controller);
  st.storage = std::move(storage);
  st.sink = std::move(sink);
  auto tick = std::chrono::duration_cast<caf::timespan>(
    std::chrono::duration<double>(std::clamp(st.settings.client_timeout_s / 4, 0.01, 1.0)));
  self->delayed_send(self, tick, wake_atom_v, uint64_t{0});
  return {
    [=](inbound_calls& in) {
      for (inbound_call& c : in.calls)
        on_call(self, c);
    },
    [=](gpu_done_atom, uint64_t transfer, uint32_t slot, const std::vector<uint64_t>& flat) {
      auto& s = self->state;
      swap_in_signal sig{transfer, slot, {}};
      for (size_t i = 0; i + 1 < flat.size(); i += 2)
        sig.blocks.push_back({static_cast<uint32_t>(flat[i]), flat[i + 1]});
      if (auto p = s.parked.find(transfer); p != s.parked.end()) {
        auto reply = std::move(p->second);
        s.parked.erase(p);
        return reply(sig);
      }
      s.signals.emplace(transfer, std::move(sig));
    },
    [=](wake_atom, uint64_t) {
      sweep_timeouts(self);
      self->delayed_send(self, tick, wake_atom_v, uint64_t{0});
    },
    [=](run_atom) -> uint64_t {
      auto& s = self->state;
      s.stopping = true;
      uint64_t released = 0;
      std::vector<uint64_t> ids;
      for (auto& [id, e] : s.engines)
        ids.push_back(id);
      for (uint64_t id : ids) {
        released += s.engines.at(id).requests.size();
        drop_engine(self, id);
      }
      return released;
    },
    [=](report_atom) -> caf::result<uint64_t, uint64_t, uint64_t> {
      // live requests, engines, requests the controller still knows of through this server
      auto& s = self->state;
      uint64_t live = 0;
      for (auto& [id, e] : s.engines)
        live += e.requests.size();
      return {live, static_cast<uint64_t>(s.engines.size()), static_cast<uint64_t>(s.owners.size())};
    },
  };
}

}  // namespace

inbound_call read_call(uint64_t conn, const char* data, size_t size, uint64_t max_bytes,
                       std::chrono::steady_clock::time_point since) {
  inbound_call in;
  in.conn = conn;
  in.since = since;
  if (size > max_bytes)
    in.oversize = size;
  else
    in.error = decode_call(data, size, in.c);
  return in;
}

caf::actor spawn_server_actor(caf::actor_system& sys, server_settings settings,
                              cache_controller_actor controller, storage_actor storage,
                              reply_sink sink) {
  return sys.spawn(server_behavior, std::move(settings), std::move(controller),
                   std::move(storage), std::move(sink));
}

}  // namespace kvtier::serve
