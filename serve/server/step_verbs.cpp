// The step verbs (docs/protocol.md): probe asks how waiting requests match, step (and its
// shorthands commit, save, free, preempt, finish) hands the controller one step's block work
// once the engine's session has checked it against each request's state.

#include <algorithm>

#include "serve/server/server_state.hpp"
#include "serve/wire/probe_reply.hpp"
#include "serve/wire/step_reply.hpp"

namespace kvtier::serve {

namespace {

// The step a call carries, with a shorthand's one entry in its list (docs/protocol.md).
session::engine_step step_of(const call& c) {
  session::engine_step s;
  s.work = c.step;
  s.evicted = c.evicted;
  switch (c.op) {
    case verb::commit:
    case verb::save: s.work.computed = {{c.req, c.tokens}}; break;
    case verb::preempt: s.work.preempted = {{c.req, c.tokens}}; break;
    case verb::finish:
    case verb::free: s.work.finished = {c.req}; break;
    default: s.number = c.step.step; break;  // one counter for `step` and its shorthands
  }
  return s;
}

// The grant as the engine knows it: its own step number and request ids.
step_answer answer_of(self_ptr self, uint64_t engine_step, const grant& g,
                      session::settled_step settled) {
  const auto& s = self->state.settings;
  step_answer a;
  a.load_blocks = std::move(settled.load_blocks);
  a.granted.step = engine_step;
  a.granted.admits = g.admits;
  for (size_t i = 0; i < g.admits.size(); ++i)
    a.granted.admits[i].req = i < settled.admits.size() ? settled.admits[i] : 0;
  a.granted.failed_grows = settled.failed_grows;
  a.granted.available_blocks = g.available_blocks;
  // The protocol's `layer_ready_ns` is when each layer's inputs were there: the swap-in's layers
  // and the copies still reading reused blocks alike (docs/protocol.md).
  a.granted.layer_ready_ns = g.layer_ready_ns;
  if (g.reused_ready_ns > 0) {
    a.granted.layer_ready_ns.resize(s.layers, 0);
    for (int64_t& t : a.granted.layer_ready_ns)
      t = std::max(t, g.reused_ready_ns);
  }
  a.now_ns = now_ns(self);
  return a;
}

void send_step_reply(self_ptr self, const reply_to& to, step_answer a, const swap_in_signal* sig) {
  const auto& s = self->state.settings;
  if (sig)
    a.swap_in = swap_in_slot{sig->slot, sig->record, s.layers, sig->blocks};
  msgpack::sbuffer buf;
  encode_step_reply(buf, to.id, a, s.gpu ? s.backend : copy_backend_kind::modelled);
  answer(self, to, buf);
}

// The engine's session settles the grant (its admissions run or wait again; an engine that left
// meanwhile has none: its ids read 0); the observers count each admission's hits.
std::optional<std::string> settle(self_ptr self, uint64_t engine,
                                  const session::engine_step& step, const grant& g,
                                  session::settled_step& out) {
  auto& st = self->state;
  auto en = st.engines.find(engine);
  if (en == st.engines.end()) {
    out.failed_grows.assign(g.failed_grows.size(), 0);
    return std::nullopt;
  }
  if (auto bad = en->second.session.end_step(step, g, out))
    return bad;
  for (size_t i = 0; i < g.admits.size(); ++i)
    if (g.admits[i].admitted)
      for (auto& ob : st.settings.observers)
        ob->on_hits(verb::step, out.prompt_blocks[i], g.admits[i].device_blocks,
                    g.admits[i].host_blocks, g.admits[i].storage_blocks);
  return std::nullopt;
}

// The grant came back: the reply goes now, or (real mode, a swap-in) once the swap-in is
// submitted and its slot's events are recorded, as it tells the engine which slot covers it.
void on_granted(self_ptr self, const reply_to& to, uint64_t engine, uint64_t number,
                const session::engine_step& step, const grant& g) {
  session::settled_step settled;
  if (auto bad = settle(self, engine, step, g, settled)) {
    note_session_fault(self, *bad);
    return fail(self, to, error_kind::bad_request,
                "step " + std::to_string(number) + "'s grant does not fit its requests: " + *bad);
  }
  step_answer a = answer_of(self, number, g, std::move(settled));
  auto& st = self->state;
  if (g.swap_in == 0 || !st.settings.gpu)
    return send_step_reply(self, to, std::move(a), nullptr);
  if (auto sg = st.signals.find(g.swap_in); sg != st.signals.end()) {
    swap_in_signal sig = std::move(sg->second);
    st.signals.erase(sg);
    return send_step_reply(self, to, std::move(a), &sig);
  }
  bool fresh = st.parked.emplace(g.swap_in, [self, to, a](const swap_in_signal& sig) {
    send_step_reply(self, to, a, &sig);
  }).second;
  KVTIER_ASSERT(fresh);  // one step's grant names its swap-in
}

}  // namespace

void do_probe(self_ptr self, ctx& x, engine_state& e) {
  probe p = x.c.probe;
  for (auto* list : {&p.candidates, &p.victims})
    for (uint64_t& req : *list) {
      const session::session_request* r = e.session.find(req);
      if (!r)
        return fail(self, x.to, error_kind::bad_request,
                    "request " + std::to_string(req) + " is not allocated");
      req = r->global;
    }
  std::unordered_map<request_id, uint64_t> back;
  for (size_t i = 0; i < p.candidates.size(); ++i)
    back[p.candidates[i]] = x.c.probe.candidates[i];
  self->request(controller_of(self, e.stack), caf::infinite, std::move(p))
    .then(
      [=](probe_reply r) {
        r.step = x.c.probe.step;
        for (candidate_match& cm : r.matches)
          cm.req = back.at(cm.req);
        msgpack::sbuffer buf;
        encode_probe_reply(buf, x.c.id, r);
        answer(self, x.to, buf);
      },
      [=](const caf::error& err) { self->quit(err); });
}

void do_step(self_ptr self, ctx& x, engine_state& e, uint64_t engine) {
  session::engine_step step = step_of(x.c);
  session::begun_step begun;
  uint64_t previous = e.session.last_step();
  if (auto bad = e.session.begin_step(step, begun))
    return fail(self, x.to, error_kind::bad_request, *bad);
  // Real mode: what this step's copies read of the engine's tensors was written by its forwards
  // up to the last step's (docs/protocol.md, "Saves").
  if (auto& gpu = self->state.settings.gpu)
    gpu->fence_reads(static_cast<uint32_t>(previous));
  reply_to to = x.to;
  uint64_t number = begun.number;
  send_commit(self, e.stack, std::move(begun.work), [=](const grant& g) {
    on_granted(self, to, engine, number, step, g);
  });
}

}  // namespace kvtier::serve
