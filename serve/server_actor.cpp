#include "serve/server_actor.hpp"

#include <algorithm>
#include <chrono>

#include "serve/off_actor_lookups.hpp"
#include "serve/server_state.hpp"

namespace kvtier::serve {

int64_t now_ns(self_ptr self) {
  auto& s = self->state.settings;
  auto wall = std::chrono::duration_cast<std::chrono::nanoseconds>(self->clock().now() - s.epoch);
  return static_cast<int64_t>(static_cast<double>(wall.count()) * s.speed);
}

// -- replies ------------------------------------------------------------------------------------

void answer(self_ptr self, uint64_t conn, verb op, steady::time_point since, msgpack::sbuffer& buf,
            std::optional<error_kind> err) {
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

// -- engines and their requests ------------------------------------------------------------------

// Answered by the controller when its blocks are released; a grant the engine no longer waits
// for is dropped.
void send_commit(self_ptr self, commit c, std::function<void(const grant&)> then) {
  c.step = self->state.next_step++;
  self->request(self->state.controller, caf::infinite, std::move(c))
    .then([then](const grant& g) { then(g); },
          // No controller: the server cannot serve; it stops with it.
          [=](const caf::error& e) { self->quit(e); });
}

namespace {

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
  st.engines.erase(it);
}

// -- the behaviour ------------------------------------------------------------------------------

namespace {

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
  if (c.op == verb::ping)
    return do_ping(self, x);
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
  // Engine ids are sequential, so anyone could name another's: an engine's requests answer only
  // the connection that registered it (docs/protocol.md, "Engines and connections").
  if (e.conn != conn)
    return fail(self, conn, c.op, c.id, x.since, error_kind::not_registered,
                "engine " + std::to_string(*c.engine)
                  + " was registered on another connection (an engine's calls come on the "
                    "connection that said hello)");
  e.last_seen = x.since;
  switch (c.op) {
    case verb::lookup: return do_lookup(self, x);
    case verb::allocate: return do_allocate(self, x, e, *c.engine);
    case verb::wait: return do_wait(self, x, e);
    case verb::probe: return do_probe(self, x, e);
    case verb::bench_swap: return do_bench_swap(self, x);
    case verb::bye: return do_bye(self, x, e, *c.engine);
    default: return do_step(self, x, e, *c.engine);
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
      for (const answered_lookup& a : in.answered)
        count_answered(self, a);
      for (inbound_call& c : in.calls)
        on_call(self, c);
    },
    [=](gpu_done_atom, uint64_t transfer, uint32_t slot, const std::vector<uint64_t>& flat) {
      swap_in_signal sig{transfer, slot, {}};
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
      return {live, static_cast<uint64_t>(s.engines.size()),
              static_cast<uint64_t>(s.owners.size())};
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
