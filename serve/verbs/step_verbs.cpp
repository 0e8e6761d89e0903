// The step verbs (docs/protocol.md): probe asks how waiting requests match, step (and its
// shorthands commit, save, free, preempt, finish) hands the controller one step's block work
// after checking it against each request's state.

#include <algorithm>

#include "serve/codec/probe_reply.hpp"
#include "serve/codec/step_reply.hpp"
#include "serve/server_state.hpp"

namespace kvtier::serve {

namespace {

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

// The grant as the engine knows it: its own step number and request ids.
void send_step_reply(self_ptr self, const ctx& x, uint64_t engine_step, const grant& g,
                     const std::vector<uint64_t>& engine_reqs, const swap_in_signal* sig,
                     std::vector<std::vector<uint32_t>> load_blocks) {
  auto& st = self->state;
  step_answer a;
  a.load_blocks = std::move(load_blocks);
  a.granted.step = engine_step;
  a.granted.admits = g.admits;
  for (size_t i = 0; i < g.admits.size(); ++i)
    a.granted.admits[i].req = engine_reqs[i];
  for (request_id r : g.failed_grows) {
    auto o = st.owners.find(r);
    a.granted.failed_grows.push_back(o == st.owners.end() ? uint64_t{0} : o->second.req);
  }
  a.granted.available_blocks = g.available_blocks;
  // The protocol's `layer_ready_ns` is when each layer's inputs were there: the swap-in's layers
  // and the copies still reading reused blocks alike (docs/protocol.md).
  a.granted.layer_ready_ns = g.layer_ready_ns;
  if (g.reused_ready_ns > 0) {
    a.granted.layer_ready_ns.resize(st.settings.layers, 0);
    for (int64_t& t : a.granted.layer_ready_ns)
      t = std::max(t, g.reused_ready_ns);
  }
  a.now_ns = now_ns(self);
  if (sig)
    a.swap_in = swap_in_slot{sig->slot, st.settings.layers, sig->blocks};
  msgpack::sbuffer buf;
  encode_step_reply(buf, x.c.id, a,
                    st.settings.gpu ? copy_backend_kind::cuda : copy_backend_kind::modelled);
  answer(self, x.conn, x.c.op, x.since, buf);
}

}  // namespace

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
      [=](probe_reply r) {
        r.step = x.c.probe.step;
        for (candidate_match& cm : r.matches)
          cm.req = back.at(cm.req);
        msgpack::sbuffer buf;
        encode_probe_reply(buf, x.c.id, r);
        answer(self, x.conn, x.c.op, x.since, buf);
      },
      [=](const caf::error& err) { self->quit(err); });
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
  // One counter for `step` and its shorthands: a shorthand takes the number after the last.
  if (c.op != verb::step)
    engine_step = e.last_step + 1;
  else if (engine_step <= e.last_step)
    return fail(self, x.conn, c.op, c.id, x.since, error_kind::bad_request,
                "step " + std::to_string(engine_step) + " does not follow step "
                  + std::to_string(e.last_step) + " (an engine's step numbers increase)");
  commit original = work;
  if (auto bad = check_step(e, work))
    return fail(self, x.conn, c.op, c.id, x.since, error_kind::bad_request, *bad);
  if (auto bad = check_device_tables(e, c, st.settings.block_size, st.settings.device_blocks))
    return fail(self, x.conn, c.op, c.id, x.since, error_kind::bad_request, *bad);
  if (auto bad = check_evictions(e, c, original, st.settings.device_blocks))
    return fail(self, x.conn, c.op, c.id, x.since, error_kind::bad_request, *bad);
  bool engine_tier = e.version >= engine_tier_version;
  e.last_step = engine_step;
  note_device_contents(e, c, original, work);
  if (engine_tier) {  // the controller's copies address the engine's blocks
    work.admit_blocks = c.admit_blocks;
    work.grow_blocks = c.grow_blocks;
  }
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
    std::vector<std::vector<uint32_t>> loads;
    if (engine_tier && en != s2.engines.end()) {
      std::vector<uint64_t> failed;
      for (request_id r : g.failed_grows)
        if (auto o = s2.owners.find(r); o != s2.owners.end())
          failed.push_back(o->second.req);
      loads = settle_device_tables(en->second, x.c, original, g, engine_reqs, failed);
    }
    auto reply = [=](const swap_in_signal* sig) {
      send_step_reply(self, x, engine_step, g, engine_reqs, sig, loads);
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

}  // namespace kvtier::serve
