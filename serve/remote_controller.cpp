#include "serve/remote_controller.hpp"

#include <unordered_map>

#include "serve/client.hpp"
#include "serve/codec/probe_reply.hpp"
#include "serve/codec/request_replies.hpp"
#include "serve/codec/stats_reply.hpp"

namespace kvtier::serve {

namespace {

struct remote_state {
  static inline const char* name = "remote_controller";
  std::unique_ptr<client> link;
  sim_clock clock;
  // waits parked at the server: call id -> (promise, request)
  std::unordered_map<uint64_t, std::pair<caf::typed_response_promise<ready>, request_id>> waits;
  uint64_t live = 0;  // requests arrived and not finished
  bool ticking = false;
  std::shared_ptr<engine_device> gpu;  // real mode
  std::chrono::steady_clock::time_point last_call;

  // The engine leaves when the replay ends: the server forgets it now, not after the timeout.
  ~remote_state() {
    if (!link)
      return;
    try {
      link->send("bye", 0);
    } catch (const std::exception&) {
      // the server is gone already: nothing to tell
    }
  }
};

using self_ptr = caf::stateful_actor<remote_state>*;

void write_marks(map_writer& w, const char* key, const std::vector<token_mark>& marks) {
  auto& pk = w.key(key);
  pk.pack_array(static_cast<uint32_t>(marks.size()));
  for (const token_mark& m : marks) {
    pk.pack_array(2);
    pk.pack(m.req);
    pk.pack(m.tokens);
  }
}

reply call(self_ptr self, std::string_view op, uint32_t fields,
           const std::function<void(map_writer&)>& fill) {
  self->state.last_call = std::chrono::steady_clock::now();
  return self->state.link->call(op, fields, fill);
}

// Parked waits answered since the last look are delivered.
void collect_waits(self_ptr self) {
  auto& st = self->state;
  for (auto it = st.waits.begin(); it != st.waits.end();) {
    auto r = st.link->try_receive(it->first);
    if (!r) {
      ++it;
      continue;
    }
    check_ok(*r);
    it->second.first.deliver(decode_wait_reply(r->root(), it->second.second));
    it = st.waits.erase(it);
  }
}

void tick(self_ptr self) {
  auto& st = self->state;
  collect_waits(self);
  // A heartbeat keeps the engine registered through a quiet stretch of the trace.
  if (std::chrono::steady_clock::now() - st.last_call > std::chrono::seconds(1))
    call(self, "ping", 0, {});
  auto every = st.waits.empty() ? std::chrono::milliseconds(500) : std::chrono::milliseconds(1);
  self->delayed_send(self, every, wake_atom_v, uint64_t{0});
}

caf::behavior remote_behavior(caf::stateful_actor<remote_state>* self, remote_options o,
                              sim_clock clock) {
  auto& st = self->state;
  st.clock = clock;
  st.link = std::make_unique<client>(o.endpoint, o.token);
  st.gpu = o.gpu;
  say_hello(*st.link, o, o.engine_name);
  st.last_call = std::chrono::steady_clock::now();
  self->send(self, wake_atom_v, uint64_t{0});
  return {
    [=](wake_atom, uint64_t) { tick(self); },
    [=](arrival& a) -> caf::result<ready> {
      auto& s = self->state;
      ++s.live;
      request_id req = a.req;
      reply r = call(self, "allocate", 2, [&](map_writer& w) {
        w.put("req", req);
        put_blocks(w, a.blocks);
      });
      if (std::optional<ready> now = decode_allocate_reply(r.root(), req))
        return *now;
      auto promise = self->make_response_promise<ready>();
      uint64_t id = s.link->send("wait", 1, [&](map_writer& w) { w.put("req", req); });
      s.waits.emplace(id, std::make_pair(promise, req));
      return promise;
    },
    [=](const probe& p) -> probe_reply {
      collect_waits(self);
      reply r = call(self, "probe", 4, [&](map_writer& w) {
        w.put("step", p.step);
        w.put("candidates", p.candidates);
        w.put("grow_blocks", p.grow_blocks);
        w.put("victims", p.victims);
      });
      probe_reply out = decode_probe_reply(r.root());
      out.step = p.step;
      return out;
    },
    [=](const commit& c) -> grant {
      auto& s = self->state;
      collect_waits(self);
      reply r = call(self, "step", 6, [&](map_writer& w) {
        w.put("step", c.step);
        write_marks(w, "computed", c.computed);
        w.put("finished", c.finished);
        write_marks(w, "preempted", c.preempted);
        write_marks(w, "grows", c.grows);
        write_marks(w, "admits", c.admits);
      });
      s.live -= c.finished.size();
      step_answer answer = decode_step_reply(r.root());
      grant g = std::move(answer.granted);
      g.step = c.step;
      // Real mode: the swap-in is submitted and its slot's events recorded; the step's compute
      // waits on them in the engine's stream.
      if (s.gpu && answer.swap_in)
        g.swap_in = s.gpu->expect_swap_in(answer.swap_in->slot, answer.swap_in->blocks);
      // Layer times come on the server's clock: moved onto ours by the distance to its "now".
      int64_t local_now = s.clock.now(self->clock());
      for (int64_t& t : g.layer_ready_ns)
        t = local_now - (answer.now_ns - t);
      return g;
    },
    [=](const prefix_lookup& q) -> prefix_hit {
      reply r = call(self, "lookup", 1, [&](map_writer& w) { put_blocks(w, q.blocks); });
      return decode_lookup_reply(r.root()).hit;
    },
    [=](caf::get_atom) -> bool {
      collect_waits(self);
      return self->state.live == 0 && self->state.waits.empty();
    },
    [=](report_atom) -> controller_report {
      reply r = call(self, "stats", 0, {});
      controller_report cr = decode_stats_reply(r.root()).controller;
      if (cr.invariant_violations > 0)
        cr.invariant_messages.push_back("the server's controller reports invariant violations");
      return cr;
    },
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
  if (!o.gpu)
    return link.hello(name, o.model, o.block_size);
  attach_request t = tensors_of(*o.gpu);
  reply r = link.hello(name, o.model, o.block_size, &t);
  if (o.verify && !r.flag("verify"))
    throw remote_error("bad_request", "--verify checks the patterns the server writes into "
                                      "computed blocks: start kvtier serve with --verify");
  return r;
}

cache_controller_actor spawn_remote_controller(caf::actor_system& sys, const remote_options& o,
                                               const sim_clock& clock) {
  // Said before the actor starts, so that a refusal reaches the command line as an error.
  client probe_link(o.endpoint, o.token, std::chrono::seconds(10));
  say_hello(probe_link, o, o.engine_name + "-check");
  probe_link.call("bye", 0, {});
  auto h = sys.spawn(remote_behavior, o, clock);
  return caf::actor_cast<cache_controller_actor>(h);
}

}  // namespace kvtier::serve
