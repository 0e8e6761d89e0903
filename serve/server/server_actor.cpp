#include "serve/server/server_actor.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "serve/server/server_state.hpp"
#include "serve/wire/curve.hpp"
#include "serve/wire/error_reply.hpp"

namespace kvtier::serve {

int64_t now_ns(self_ptr self) {
  auto& s = self->state.settings;
  auto wall = std::chrono::duration_cast<std::chrono::nanoseconds>(self->clock().now() - s.epoch);
  return static_cast<int64_t>(static_cast<double>(wall.count()) * s.speed);
}

// -- replies ------------------------------------------------------------------------------------

void answer(self_ptr self, const reply_to& to, msgpack::sbuffer& buf,
            std::optional<error_kind> err) {
  auto& st = self->state;
  KVTIER_ASSERT(buf.size() > 0);  // every call gets one reply, and a reply is a map
  if (to.counted)
    ++st.counters.calls[static_cast<int>(to.op)];
  if (err)
    ++st.counters.errors[static_cast<int>(*err)];
  int64_t latency = std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now() - to.since)
                      .count();
  for (auto& o : st.settings.observers) {
    if (to.counted)
      o->on_call(to.op, latency, err);
    else if (err)
      o->on_refused(*err);
  }
  st.sink(to.conn, std::string(buf.data(), buf.size()));
}

void fail(self_ptr self, const reply_to& to, error_kind kind, const std::string& message) {
  std::string bytes = encode_error(to.id, error_name(kind), message);
  msgpack::sbuffer buf;
  buf.write(bytes.data(), bytes.size());
  answer(self, to, buf, kind);
}

void note_session_fault(self_ptr self, const std::string& what) {
  ++self->state.session_faults;
  std::fprintf(stderr, "kvtier serve: internal error: %s\n", what.c_str());
}

// -- engines and their requests ------------------------------------------------------------------

const cache_controller_actor& controller_of(self_ptr self, uint32_t stack) {
  return self->state.controllers.at(stack);
}

// Answered by the controller when its blocks are released; a grant the engine no longer waits
// for is dropped.
void send_commit(self_ptr self, uint32_t stack, commit c, std::function<void(const grant&)> then) {
  c.step = self->state.directory->next_step++;  // increasing at every stack too
  self->request(controller_of(self, stack), caf::infinite, std::move(c))
    .then([=](const grant& g) {
            then(g);
            // The reply is on its way: the step's tree work now (docs/design.md, "Tree work
            // after the reply").
            if (self->state.settings.tree_work == tree_work_timing::after_reply)
              self->send(controller_of(self, stack), tree_work_atom_v);
          },
          // No controller: the server cannot serve; it stops with it.
          [=](const caf::error& e) { self->quit(e); });
}

namespace {

// Releases every request of `e` (as finished); ones still loading are finished once ready.
uint64_t release_engine(self_ptr self, engine_state& e) {
  auto& st = self->state;
  session::released_requests r = e.session.release_all();
  for (request_id global : r.loading) {
    bool fresh = st.orphans.insert(global).second;
    KVTIER_ASSERT(fresh);  // a controller id is one request's, of one engine
  }
  uint64_t released = r.finished.size() + r.loading.size();
  st.counters.requests_released += released;
  // An engine that owned its device blocks (version 3) takes their contents with it: kvtier
  // forgets its device copies, so that a restarted engine is offered its host copies.
  if (!r.finished.empty() || !r.device_dropped.empty()) {
    commit c;
    c.finished = std::move(r.finished);
    c.device_dropped = std::move(r.device_dropped);
    send_commit(self, e.stack, std::move(c), [](const grant&) {});
  }
  return released;
}

}  // namespace

void drop_engine(self_ptr self, uint64_t engine) {
  auto& st = self->state;
  auto it = st.engines.find(engine);
  if (it == st.engines.end())
    return;
  uint64_t released = release_engine(self, it->second);
  for (auto& o : st.settings.observers)
    o->on_engine(engine, it->second.name, false, released);
  if (st.settings.off_actor)
    st.settings.off_actor->engine_dropped(engine);
  st.directory->leave(it->second.stack, it->second.conn, it->second.name);
  st.engines.erase(it);
}

// -- the behaviour ------------------------------------------------------------------------------

namespace {

// The envelope's checks: size, decoding, token, shutdown; false when the call was refused.
bool admissible(self_ptr self, const inbound_call& in, const reply_to& to) {
  auto& st = self->state;
  const call& c = in.c;
  if (in.oversize != 0)
    fail(self, {to.conn, verb::ping, 0, to.since, false}, error_kind::too_large,
         "the message holds " + std::to_string(in.oversize) + " bytes, beyond "
           "serve.max_message_bytes (" + std::to_string(st.settings.max_message_bytes) + ")");
  else if (in.error)
    fail(self, to, in.error->kind, in.error->message);
  else if (!st.settings.token.empty() && (!c.token || !same_secret(*c.token, st.settings.token)))
    fail(self, to, error_kind::unauthorized,
         c.token ? "wrong token" : "this server needs a 'token'");
  else if (st.stopping && c.op != verb::ping && c.op != verb::stats)
    fail(self, to, error_kind::shutting_down, "the server is shutting down");
  else
    return true;
  return false;
}

// The engine a call names, registered on the call's connection; null (and the call refused)
// otherwise.
engine_state* engine_of(self_ptr self, const ctx& x) {
  const call& c = x.c;
  if (!c.engine) {
    fail(self, x.to, error_kind::malformed,
         std::string("'") + verb_name(c.op) + "' needs 'engine'");
    return nullptr;
  }
  auto it = self->state.engines.find(*c.engine);
  if (it == self->state.engines.end()) {
    fail(self, x.to, error_kind::not_registered,
         "engine " + std::to_string(*c.engine)
           + " is not registered (say hello first; an engine silent for "
             "serve.client_timeout_s is dropped)");
    return nullptr;
  }
  // Engine ids are sequential, so anyone could name another's: an engine's requests answer only
  // the connection that registered it (docs/protocol.md, "Engines and connections").
  if (it->second.conn != x.to.conn) {
    fail(self, x.to, error_kind::not_registered,
         "engine " + std::to_string(*c.engine)
           + " was registered on another connection (an engine's calls come on the "
             "connection that said hello)");
    return nullptr;
  }
  return &it->second;
}

// A hello: placed on this shard's stack by the socket thread, or else joining it here (one
// stack, or a connection already placed here); its place is given back unless an engine
// registered.
void on_hello(self_ptr self, inbound_call& in, const reply_to& to) {
  auto& st = self->state;
  if (!in.placed && in.oversize == 0 && !in.error)
    in.placed = st.directory->join(st.stack, in.conn);
  uint64_t registered = st.counters.engines_registered;
  if (admissible(self, in, to)) {
    ctx x{to, std::move(in.c)};
    do_hello(self, x);
  }
  if (in.placed && st.counters.engines_registered == registered)
    st.directory->cancel(*in.placed, in.conn);
}

void on_call(self_ptr self, inbound_call& in) {
  reply_to to{in.conn, in.c.op, in.c.id, in.since, in.oversize == 0 && in.c.op_given};
  if (in.placed || in.c.op == verb::hello)
    return on_hello(self, in, to);
  if (!admissible(self, in, to))
    return;
  ctx x{to, std::move(in.c)};
  const call& c = x.c;
  if (c.op == verb::ping)
    return do_ping(self, x);
  if (c.op == verb::stats)
    return do_stats(self, x);
  if (c.op == verb::attach)
    return do_attach(self, x);
  engine_state* e = engine_of(self, x);
  if (!e)
    return;
  e->last_seen = x.to.since;
  switch (c.op) {
    case verb::lookup: return do_lookup(self, x, *e);
    case verb::allocate: return do_allocate(self, x, *e, *c.engine);
    case verb::wait: return do_wait(self, x, *e);
    case verb::probe: return do_probe(self, x, *e);
    case verb::bench_swap: return do_bench_swap(self, x);
    case verb::bye: return do_bye(self, x, *e, *c.engine);
    default: return do_step(self, x, *e, *c.engine);
  }
}

// Frames of connections placed on this shard's stack, decoded here (inbound_calls.hpp).
void decode_and_serve(self_ptr self, undecoded_frames& u) {
  auto& st = self->state;
  for (size_t i = 0; i < u.size(); ++i) {
    inbound_call in = read_call(u.conns[i], u.frames[i].data<char>(), u.frames[i].size(),
                                st.settings.max_message_bytes, u.since[i]);
    on_call(self, in);
  }
}

// A lookup the socket thread answered counts as one the actor answered, and keeps its engine
// alive.
void count_answered(self_ptr self, const answered_lookup& a) {
  auto& st = self->state;
  ++st.counters.calls[static_cast<int>(verb::lookup)];
  for (auto& o : st.settings.observers) {
    o->on_call(verb::lookup, a.latency_ns, std::nullopt);
    o->on_hits(verb::lookup, a.prompt_blocks, a.device_blocks, a.host_blocks, 0);
  }
  if (auto it = st.engines.find(a.engine); it != st.engines.end())
    it->second.last_seen = std::max(it->second.last_seen, a.since);
}

void sweep_timeouts(self_ptr self) {
  auto& st = self->state;
  auto limit = std::chrono::duration_cast<steady::duration>(
    std::chrono::duration<double>(st.settings.client_timeout_s));
  auto now = steady::now();
  std::vector<uint64_t> late;
  for (auto& [id, e] : st.engines)  // a call parked in `wait` is not silence
    if (!e.session.has_waiters() && now - e.last_seen > limit)
      late.push_back(id);
  for (uint64_t id : late) {
    ++st.counters.engines_timed_out;
    drop_engine(self, id);
  }
}

caf::behavior server_behavior(caf::stateful_actor<server_state>* self, server_settings settings,
                              uint32_t stack, server_shared shared) {
  auto& st = self->state;
  st.settings = std::move(settings);
  KVTIER_ASSERT(stack < shared.controllers.size());
  KVTIER_ASSERT(shared.directory && shared.directory->stacks() == shared.controllers.size());
  st.stack = stack;
  st.controllers = std::move(shared.controllers);
  st.shards = std::move(shared.shards);
  st.directory = std::move(shared.directory);
  st.storage = std::move(shared.storage);
  st.sink = std::move(shared.sink);
  auto tick = std::chrono::duration_cast<caf::timespan>(
    std::chrono::duration<double>(std::clamp(st.settings.client_timeout_s / 4, 0.01, 1.0)));
  self->delayed_send(self, tick, wake_atom_v, uint64_t{0});
  return {
    [=](inbound_calls& in) {
      for (const answered_lookup& a : in.answered)
        count_answered(self, a);
      for (inbound_call& c : in.calls)
        on_call(self, c);
      if (in.undecoded)
        decode_and_serve(self, *in.undecoded);
    },
    [=](gpu_done_atom, uint64_t transfer, uint32_t slot, uint32_t record,
        const std::vector<uint64_t>& flat) {
      swap_in_signal sig{transfer, slot, record, {}};
      for (size_t i = 0; i + 1 < flat.size(); i += 2)
        sig.blocks.push_back({static_cast<uint32_t>(flat[i]), flat[i + 1]});
      on_swap_in_submitted(self, std::move(sig));
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
        released += s.engines.at(id).session.size();
        drop_engine(self, id);
      }
      return released;
    },
    [=](report_atom, caf::get_atom) -> std::vector<uint64_t> { return stats_part(self); },
  };
}

}  // namespace

std::vector<caf::actor> spawn_server_shards(caf::actor_system& sys, const server_settings& settings,
                                            std::vector<cache_controller_actor> controllers,
                                            storage_actor storage, reply_sink sink,
                                            std::shared_ptr<engine_directory> directory) {
  KVTIER_ASSERT(!controllers.empty());
  auto shards = std::make_shared<std::vector<caf::actor>>();
  shards->reserve(controllers.size());  // read by the shards only once calls come
  server_shared shared{std::move(controllers), shards, std::move(directory), std::move(storage),
                       std::move(sink)};
  for (uint32_t k = 0; k < shared.controllers.size(); ++k)
    shards->push_back(sys.spawn(server_behavior, settings, k, shared));
  return *shards;
}

}  // namespace kvtier::serve
