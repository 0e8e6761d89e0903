#include "serve/remote_controller.hpp"

#include <unordered_map>

#include "serve/client.hpp"

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

std::vector<uint64_t> u64s(const msgpack::object* o) {
  std::vector<uint64_t> out;
  if (o && o->type == msgpack::type::ARRAY)
    for (uint32_t i = 0; i < o->via.array.size; ++i)
      out.push_back(o->via.array.ptr[i].as<uint64_t>());
  return out;
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
    it->second.first.deliver(ready{it->second.second,
                                   static_cast<uint32_t>(r->u64("prefetched_blocks")),
                                   static_cast<uint32_t>(r->u64("available_blocks"))});
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
      if (r.str("state") == "ready")
        return ready{req, static_cast<uint32_t>(r.u64("prefetched_blocks")),
                     static_cast<uint32_t>(r.u64("available_blocks"))};
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
      probe_reply out;
      out.step = p.step;
      out.available_blocks = static_cast<uint32_t>(r.u64("available_blocks"));
      if (const msgpack::object* m = r.find("matches"); m && m->type == msgpack::type::ARRAY)
        for (uint32_t i = 0; i < m->via.array.size; ++i) {
          const msgpack::object& x = m->via.array.ptr[i];
          candidate_match cm;
          cm.req = reply::u64_in(x, "req");
          cm.device_blocks = static_cast<uint32_t>(reply::u64_in(x, "device_blocks"));
          cm.host_blocks = static_cast<uint32_t>(reply::u64_in(x, "host_blocks"));
          cm.device_tokens = reply::u64_in(x, "device_tokens");
          cm.host_tokens = reply::u64_in(x, "host_tokens");
          cm.idle_device_blocks = static_cast<uint32_t>(reply::u64_in(x, "idle_device_blocks"));
          out.matches.push_back(cm);
        }
      for (uint64_t f : u64s(r.find("victim_frees")))
        out.victim_frees.push_back(static_cast<uint32_t>(f));
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
      grant g;
      g.step = c.step;
      if (const msgpack::object* m = r.find("admits"); m && m->type == msgpack::type::ARRAY)
        for (uint32_t i = 0; i < m->via.array.size; ++i) {
          const msgpack::object& x = m->via.array.ptr[i];
          admit_result a;
          a.req = reply::u64_in(x, "req");
          const msgpack::object* ad = reply::find_in(x, "admitted");
          a.admitted = ad && ad->type == msgpack::type::BOOLEAN && ad->via.boolean;
          a.device_blocks = static_cast<uint32_t>(reply::u64_in(x, "device_blocks"));
          a.host_blocks = static_cast<uint32_t>(reply::u64_in(x, "host_blocks"));
          a.storage_blocks = static_cast<uint32_t>(reply::u64_in(x, "storage_blocks"));
          a.device_tokens = reply::u64_in(x, "device_tokens");
          a.host_tokens = reply::u64_in(x, "host_tokens");
          a.storage_tokens = reply::u64_in(x, "storage_tokens");
          g.admits.push_back(a);
        }
      g.failed_grows = u64s(r.find("failed_grows"));
      // Real mode: the swap-in is submitted and its slot's events recorded; the step's compute
      // waits on them in the engine's stream.
      const msgpack::object* sw = r.find("swap_in");
      if (s.gpu && sw && sw->type == msgpack::type::MAP)
        g.swap_in = s.gpu->expect_swap_in(static_cast<uint32_t>(reply::u64_in(*sw, "slot")),
                                          block_patterns(reply::find_in(*sw, "blocks")));
      g.available_blocks = static_cast<uint32_t>(r.u64("available_blocks"));
      // Layer times come on the server's clock: moved onto ours by the distance to its "now".
      int64_t server_now = r.i64("now_ns");
      int64_t local_now = s.clock.now(self->clock());
      if (const msgpack::object* l = r.find("layer_ready_ns"); l && l->type == msgpack::type::ARRAY)
        for (uint32_t i = 0; i < l->via.array.size; ++i)
          g.layer_ready_ns.push_back(local_now - (server_now - l->via.array.ptr[i].as<int64_t>()));
      return g;
    },
    [=](const prefix_lookup& q) -> prefix_hit {
      reply r = call(self, "lookup", 1, [&](map_writer& w) { put_blocks(w, q.blocks); });
      return {static_cast<uint32_t>(r.u64("device_blocks")),
              static_cast<uint32_t>(r.u64("host_blocks")), r.u64("device_tokens"),
              r.u64("host_tokens")};
    },
    [=](caf::get_atom) -> bool {
      collect_waits(self);
      return self->state.live == 0 && self->state.waits.empty();
    },
    [=](report_atom) -> controller_report {
      reply r = call(self, "stats", 0, {});
      controller_report cr;
      if (const msgpack::object* c = r.find("controller")) {
        cr.device_used = static_cast<uint32_t>(reply::u64_in(*c, "device_used"));
        cr.host_used = static_cast<uint32_t>(reply::u64_in(*c, "host_used"));
        cr.tree_nodes = static_cast<uint32_t>(reply::u64_in(*c, "tree_nodes"));
        cr.swap_ins = reply::u64_in(*c, "swap_ins");
        cr.backups = reply::u64_in(*c, "backups");
        cr.write_backs = reply::u64_in(*c, "write_backs");
        cr.loads = reply::u64_in(*c, "loads");
        cr.stores = reply::u64_in(*c, "stores");
        cr.device_evictions = reply::u64_in(*c, "device_evictions");
        cr.host_evictions = reply::u64_in(*c, "host_evictions");
        cr.invariant_violations = reply::u64_in(*c, "invariant_violations");
        if (cr.invariant_violations > 0)
          cr.invariant_messages.push_back("the server's controller reports invariant violations");
      }
      return cr;
    },
  };
}

}  // namespace

std::vector<gpu::block_pattern> block_patterns(const msgpack::object* blocks) {
  std::vector<gpu::block_pattern> out;
  if (!blocks || blocks->type != msgpack::type::ARRAY)
    throw std::runtime_error("the server's reply has no 'blocks' list");
  for (uint32_t i = 0; i < blocks->via.array.size; ++i) {
    const msgpack::object& pair = blocks->via.array.ptr[i];
    if (pair.type != msgpack::type::ARRAY || pair.via.array.size != 2)
      throw std::runtime_error("the server's 'blocks' entries must be [device block, key]");
    out.push_back({pair.via.array.ptr[0].as<uint32_t>(), pair.via.array.ptr[1].as<uint64_t>()});
  }
  return out;
}

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
