#include "serve/client/remote_controller.hpp"

#include <algorithm>
#include <stdexcept>
#include <unordered_map>

#include "core/check.hpp"

#include "serve/client/engine_block_allocator.hpp"
#include "serve/client/remote_link.hpp"
#include "serve/wire/call.hpp"
#include "serve/wire/probe_reply.hpp"
#include "serve/wire/request_replies.hpp"
#include "serve/wire/stats_reply.hpp"
#include "serve/wire/step_reply.hpp"

namespace kvtier::serve {

namespace {

using steady = std::chrono::steady_clock;

// How long a call may go unanswered (a `wait`, parked at the server, may take longer).
constexpr auto reply_timeout = std::chrono::seconds(60);

// What an unanswered call waits for: an answer in the time a call may take, a request's loads
// (a `wait`, parked at the server), or nothing anyone waits on (a heartbeat).
enum class call_kind : uint8_t { answer, parked, heartbeat };

call call_of(verb op) {
  call c;
  c.op = op;
  return c;
}

// A request's call (allocate, wait) for `req`.
call request_call(verb op, request_id req) {
  call c = call_of(op);
  c.req = req;
  return c;
}

struct pending_call {
  call_kind kind = call_kind::answer;
  std::function<void(const reply&)> on_reply;
  std::function<void(const caf::error&)> on_error;
  steady::time_point since;
};

struct remote_state {
  static inline const char* name = "remote_controller";
  std::unique_ptr<remote_link> link;
  sim_clock clock;
  std::unordered_map<uint64_t, pending_call> pending;  // by call id
  uint64_t live = 0;  // requests arrived and not finished
  std::shared_ptr<engine_device> gpu;  // real mode
  steady::time_point last_call;
  // device_owner::engine: the engine's own allocator, and each request's prompt for it.
  std::unique_ptr<engine_block_allocator> blocks;
  std::unordered_map<request_id, std::vector<cache_block>> prompts;

  // The engine leaves when the replay ends: the server forgets it now, not after the timeout.
  ~remote_state() {
    if (link)
      link->send(call_of(verb::bye));
  }
};

using self_ptr = cache_controller_actor::stateful_pointer<remote_state>;

void send_call(self_ptr self, call c, pending_call p) {
  auto& st = self->state;
  st.last_call = steady::now();
  p.since = st.last_call;
  uint64_t id = st.link->send(std::move(c));
  st.pending.emplace(id, std::move(p));
}

// Sends `c`; its reply, read by `decode`, answers the promise returned.
template <class T, class Decode>
caf::typed_response_promise<T> ask(self_ptr self, call c, Decode decode) {
  auto promise = self->make_response_promise<T>();
  pending_call p;
  p.on_reply = [promise, decode](const reply& r) mutable { promise.deliver(decode(r)); };
  p.on_error = [promise](const caf::error& e) mutable { promise.deliver(e); };
  send_call(self, std::move(c), std::move(p));
  return promise;
}

// The server refused a call, answered one in a form the protocol does not have, or went
// silent: the run cannot go on without its controller. Every caller is told, and the actor
// ends with the error.
void fail_all(self_ptr self, const std::string& why) {
  caf::error e = caf::make_error(caf::sec::runtime_error, "kvtier serve: " + why);
  auto pending = std::move(self->state.pending);
  self->state.pending.clear();
  for (auto& [id, p] : pending)
    p.on_error(e);
  self->quit(e);
}

void on_reply(self_ptr self, uint64_t id) {
  auto& st = self->state;
  if (id == remote_link::broken)
    return fail_all(self, st.link->failure());
  std::optional<reply> r = st.link->take(id);
  auto it = st.pending.find(id);
  if (!r || it == st.pending.end())
    return;
  pending_call p = std::move(it->second);
  st.pending.erase(it);
  try {
    check_ok(*r);
    p.on_reply(*r);
  } catch (const std::exception& e) {
    fail_all(self, e.what());
  }
}

void tick(self_ptr self) {
  auto& st = self->state;
  auto now = steady::now();
  for (const auto& [id, p] : st.pending)
    if (p.kind != call_kind::parked && now - p.since > reply_timeout)
      return fail_all(self, "no reply within " + std::to_string(reply_timeout.count()) + " s");
  // A heartbeat keeps the engine registered through a quiet stretch of the trace.
  if (now - st.last_call > std::chrono::seconds(1)) {
    pending_call beat;
    beat.kind = call_kind::heartbeat;
    beat.on_reply = [](const reply&) {};
    beat.on_error = [](const caf::error&) {};
    send_call(self, call_of(verb::ping), std::move(beat));
  }
  self->delayed_send(self, std::chrono::milliseconds(500), wake_atom_v, uint64_t{0});
}

// Idle: every request finished and every call but heartbeats answered.
bool idle(self_ptr self) {
  auto& st = self->state;
  if (st.live > 0)
    return false;
  for (const auto& [id, p] : st.pending)
    if (p.kind != call_kind::heartbeat)
      return false;
  return true;
}

caf::result<ready> on_arrival(self_ptr self, const arrival& a) {
  ++self->state.live;
  if (self->state.blocks)
    self->state.prompts[a.req] = a.blocks;
  request_id req = a.req;
  auto promise = self->make_response_promise<ready>();
  auto fail = [promise](const caf::error& e) mutable { promise.deliver(e); };
  pending_call p;
  p.on_error = fail;
  p.on_reply = [self, promise, fail, req](const reply& r) mutable {
    if (std::optional<ready> now = decode_allocate_reply(r.root(), req)) {
      promise.deliver(*now);
      return;
    }
    // Storage is asked or loads: `wait` is answered once they have landed.
    pending_call w;
    w.kind = call_kind::parked;
    w.on_error = fail;
    w.on_reply = [promise, req](const reply& r) mutable {
      promise.deliver(decode_wait_reply(r.root(), req));
    };
    send_call(self, request_call(verb::wait, req), std::move(w));
  };
  call alloc = request_call(verb::allocate, req);
  alloc.text.kind = prompt::form::blocks;
  alloc.text.blocks = a.blocks;
  send_call(self, std::move(alloc), std::move(p));
  return promise;
}

// The engine's allocator takes the step's blocks in the server's order (finished, preempted,
// grows, admits); the ids go with the step (docs/protocol.md, version 3).
struct engine_tables {
  std::vector<std::vector<uint32_t>> grows, admits;
  std::vector<uint32_t> evicted;  // blocks whose contents went since the last step
};

engine_tables take_engine_blocks(remote_state& s, const commit& c) {
  engine_tables t;
  for (request_id r : c.finished) {
    s.blocks->release(r);
    s.prompts.erase(r);
  }
  for (const token_mark& m : c.preempted)
    s.blocks->release(m.req);
  // An allocator that runs dry sends a short table: the server refuses the step, naming it.
  for (const token_mark& m : c.grows)
    t.grows.push_back(s.blocks->grow(m.req, m.tokens).value_or(std::vector<uint32_t>{}));
  for (const token_mark& m : c.admits)
    t.admits.push_back(
      s.blocks->admit(m.req, s.prompts[m.req], m.tokens).value_or(std::vector<uint32_t>{}));
  // Not sent yet: with these reports the server's device view follows this allocator, whose
  // evictions still differ from kvtier's own model's (more device hits than `kvtier replay
  // --clock wall`), and the end-to-end test compares with that model (docs/protocol.md).
  t.evicted = s.blocks->take_evicted();
  return t;
}

// What the server's grant means for the engine's blocks: refused admissions and growths give
// theirs back; each admission's loads must land in its own table, after its device hits.
void settle_engine_blocks(remote_state& s, const commit& c, const engine_tables& t,
                          const step_answer& a) {
  for (size_t i = 0; i < c.grows.size(); ++i)
    for (request_id r : a.granted.failed_grows)
      if (r == c.grows[i].req)
        s.blocks->shrink(r, t.grows[i].size());
  for (size_t i = 0; i < a.granted.admits.size(); ++i) {
    const admit_result& r = a.granted.admits[i];
    if (!r.admitted) {
      s.blocks->refuse(r.req);
      continue;
    }
    const std::vector<uint32_t>& table = s.blocks->table(r.req);
    size_t from = std::min<size_t>(r.device_blocks, table.size());
    size_t to = std::min<size_t>(from + r.host_blocks + r.storage_blocks, table.size());
    std::vector<uint32_t> want(table.begin() + from, table.begin() + to);
    if (i >= a.load_blocks.size() || a.load_blocks[i] != want)
      throw std::runtime_error("request " + std::to_string(r.req) + "'s load_blocks are not "
                               "the engine's blocks after its device hits");
  }
}

caf::result<grant> on_commit(self_ptr self, const commit& c) {
  uint64_t step = c.step;
  size_t finished = c.finished.size();
  auto tables = std::make_shared<engine_tables>();
  auto& st = self->state;
  if (st.blocks)
    *tables = take_engine_blocks(st, c);
  call out = call_of(verb::step);
  out.step.step = c.step;
  out.step.computed = c.computed;
  out.step.finished = c.finished;
  out.step.preempted = c.preempted;
  out.step.grows = c.grows;
  out.step.admits = c.admits;
  if (st.blocks) {  // version 3: [req, tokens, [the engine's block ids]]
    out.step.grow_blocks = tables->grows;
    out.step.admit_blocks = tables->admits;
  }
  return ask<grant>(self, std::move(out), [self, step, finished, c, tables](const reply& r) {
    auto& s = self->state;
    KVTIER_ASSERT(s.live >= finished);  // the scheduler finishes only requests that arrived
    s.live -= finished;
    step_answer a = decode_step_reply(r.root());
    if (s.blocks)
      settle_engine_blocks(s, c, *tables, a);
    grant g = std::move(a.granted);
    g.step = step;
    // Real mode: the swap-in is submitted and its slot's events recorded; the step's compute
    // waits on them in the engine's stream.
    if (s.gpu && a.swap_in)
      g.swap_in = s.gpu->expect_swap_in(a.swap_in->slot, a.swap_in->blocks);
    // Layer times come on the server's clock: moved onto ours by the distance to its "now".
    int64_t local_now = s.clock.now(self->clock());
    for (int64_t& t : g.layer_ready_ns)
      t = local_now - (a.now_ns - t);
    return g;
  });
}

caf::result<probe_reply> on_probe(self_ptr self, const probe& p) {
  uint64_t step = p.step;
  call out = call_of(verb::probe);
  out.probe = p;
  return ask<probe_reply>(self, std::move(out), [step](const reply& r) {
    probe_reply out = decode_probe_reply(r.root());
    out.step = step;
    return out;
  });
}

cache_controller_actor::behavior_type remote_behavior(self_ptr self,
                                                      std::shared_ptr<client> greeted,
                                                      remote_options o, sim_clock clock) {
  auto& st = self->state;
  st.clock = clock;
  st.gpu = o.gpu;
  if (o.owner == device_owner::engine)
    st.blocks = std::make_unique<engine_block_allocator>(o.device_blocks, o.block_size);
  st.link = std::make_unique<remote_link>(std::move(greeted),
                                          caf::actor_cast<cache_controller_actor>(self));
  st.last_call = steady::now();
  self->send(self, wake_atom_v, uint64_t{0});
  return {
    [=](const prefix_lookup& q) -> caf::result<prefix_hit> {
      call c = call_of(verb::lookup);
      c.text.kind = prompt::form::blocks;
      c.text.blocks = q.blocks;
      return ask<prefix_hit>(self, std::move(c),
                             [](const reply& r) { return decode_lookup_reply(r.root()).hit; });
    },
    [=](const preallocation&) -> caf::result<preallocation_result> {
      // docs/protocol.md has no preallocation: a PD decode instance keeps its own controller.
      return caf::make_error(caf::sec::runtime_error,
                             "kvtier serve's protocol has no preallocation (PD decode "
                             "instances): engine-sim drives mixed instances only");
    },
    [=](const arrival& a) -> caf::result<ready> { return on_arrival(self, a); },
    [=](const probe& p) -> caf::result<probe_reply> { return on_probe(self, p); },
    [=](const commit& c) -> caf::result<grant> { return on_commit(self, c); },
    [=](report_atom) -> caf::result<controller_report> {
      return ask<controller_report>(self, call_of(verb::stats), [](const reply& r) {
        controller_report cr = decode_stats_reply(r.root()).controller;
        if (cr.invariant_violations > 0)
          cr.invariant_messages.push_back("the server's controller reports invariant violations");
        return cr;
      });
    },
    [=](caf::get_atom) -> bool { return idle(self); },
    // 0: the actor's own timer; else a reply the socket thread posted.
    [=](wake_atom, uint64_t call) {
      if (call == 0)
        tick(self);
      else
        on_reply(self, call);
    },
    // The server does a step's tree work itself once its reply went out.
    [=](tree_work_atom) {},
  };
}

}  // namespace

attach_request tensors_of(const engine_device& gpu) {
  attach_request t;
  t.present = true;
  t.device_blocks = gpu.device_blocks();
  for (const gpu::layer_tensor_handle& h : gpu.tensors()) {
    ipc_bytes b;
    std::copy(h.handle.begin(), h.handle.end(), b.begin());
    t.layer_handles.push_back(b);
    t.layer_offsets.push_back(h.offset);
  }
  t.event_slots = gpu.event_slots();
  for (const gpu::ipc_handle& h : gpu.events()) {
    ipc_bytes b;
    std::copy(h.begin(), h.end(), b.begin());
    t.events.push_back(b);
  }
  return t;
}

reply say_hello(client& link, const remote_options& o, const std::string& name) {
  link.share_config(o.shared);
  if (!o.gpu)
    return o.owner == device_owner::engine
             ? link.hello_version(name, o.model, o.block_size, engine_tier_version)
             : link.hello(name, o.model, o.block_size);
  attach_request t = tensors_of(*o.gpu);
  reply r = o.owner == device_owner::engine
              ? link.hello_version(name, o.model, o.block_size, engine_tier_version, &t)
              : link.hello(name, o.model, o.block_size, &t);
  if (o.verify && !link.greeting().verify)
    throw remote_error("bad_request", "--verify checks the patterns the server writes into "
                                      "computed blocks: start kvtier serve with --verify");
  return r;
}

cache_controller_actor spawn_remote_controller(caf::actor_system& sys, const remote_options& o,
                                               const sim_clock& clock) {
  // Said before the actor starts, so that a refusal reaches the command line as an error.
  auto link = std::make_shared<client>(o.endpoint, o.token, std::chrono::seconds(10), o.curve);
  say_hello(*link, o, o.engine_name);
  return sys.spawn(remote_behavior, std::move(link), o, clock);
}

}  // namespace kvtier::serve
