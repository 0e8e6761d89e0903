#include "actors/cache_controller/cache_controller.hpp"

#include <algorithm>
#include <map>

#include "core/check.hpp"
#include "core/time_math.hpp"

namespace kvtier {

namespace {

struct pending_grant {
  grant g;
  caf::typed_response_promise<grant> promise;
  step_inputs inputs;
  std::vector<uint64_t> waiting;  // transfer ids not yet done
  int64_t barrier_done = 0;
  std::vector<int64_t> layers;    // the swap-in's per-layer times
};

struct controller_state {
  static inline const char* name = "cache_controller";
  std::unique_ptr<controller_core> core;
  storage_actor storage;
  transfer_engine_actor engine;
  std::map<request_id, caf::typed_response_promise<ready>> readying;
  // The timeout policy's deadlines: timer token -> request (a token outlives its prefetch).
  std::map<uint64_t, request_id> deadlines;
  uint64_t next_deadline = 1;
  std::map<uint64_t, pending_grant> grants;  // by step
};

using self_ptr = cache_controller_actor::stateful_pointer<controller_state>;

// -- transfers and grants -------------------------------------------------------------------------

void handle_done(self_ptr self, const transfer_done& d);

void send_transfers(self_ptr self, std::vector<transfer>& out) {
  for (transfer& t : out)
    self->request(self->state.engine, caf::infinite, std::move(t))
      .then([=](const transfer_done& d) { handle_done(self, d); },
            // No transfer engine: the instance cannot move a block again.
            [=](const caf::error& e) { self->quit(e); });
  out.clear();
}

void deliver_grant(self_ptr self, pending_grant& p) {
  auto& g = p.g;
  KVTIER_ASSERT(p.layers.empty() || p.layers.size() == self->state.core->options().layers);
  g.layer_ready_ns = p.layers;
  g.reused_ready_ns = p.barrier_done;
  self->state.core->check_step_start(p.inputs);
  p.promise.deliver(std::move(g));
}

void handle_done(self_ptr self, const transfer_done& d) {
  auto& st = self->state;
  std::vector<transfer> out;
  std::vector<request_id> landed;
  st.core->on_transfer_done(d, out, landed);
  send_transfers(self, out);
  for (request_id req : landed) {
    auto it = st.readying.find(req);
    if (it == st.readying.end())
      continue;  // made ready before its loads landed (best_effort, timeout)
    it->second.deliver(ready{req, st.core->prefetched(req), st.core->model().device_available()});
    st.readying.erase(it);
  }
  for (auto it = st.grants.begin(); it != st.grants.end();) {
    pending_grant& p = it->second;
    auto w = std::find(p.waiting.begin(), p.waiting.end(), d.id);
    if (w == p.waiting.end()) {
      ++it;
      continue;
    }
    p.waiting.erase(w);
    if (d.id == p.inputs.swap_in)
      p.layers = d.layer_done_ns;
    else
      p.barrier_done = std::max(p.barrier_done, d.done_ns);
    if (!p.waiting.empty()) {
      ++it;
      continue;
    }
    deliver_grant(self, p);
    it = st.grants.erase(it);
  }
}

// -- arrival and storage prefetch -----------------------------------------------------------------

/// The timeout policy: `req` is made ready at its deadline if its loads have not landed by then.
void arm_prefetch_deadline(self_ptr self, request_id req) {
  auto& s = self->state;
  const controller_options& o = s.core->options();
  // SGLang: base + pages x page_size / 1024 x per-1024-token allowance.
  auto allowance = static_cast<double>(o.prefetch_timeout_per_ki_token_ns)
                   * static_cast<double>(s.core->prefetch_tokens(req)) / 1024.0;
  int64_t due = time_add(time_add(o.clock.now(self->clock()), o.prefetch_timeout_ns),
                         time_from(allowance));
  uint64_t token = s.next_deadline++;
  s.deadlines.emplace(token, req);
  self->delayed_send(self, o.clock.until(self->clock(), due), wake_atom_v, token);
}

/// Storage holds the first `leading` blocks looked up for `req`: they load, and `promise` says
/// ready when the prefetch policy allows.
void handle_exists(self_ptr self, request_id req, uint32_t leading,
                   caf::typed_response_promise<ready>& promise) {
  auto& s = self->state;
  std::vector<transfer> out;
  bool loading = s.core->on_exists(req, leading, out);
  send_transfers(self, out);
  const controller_options& o = s.core->options();
  if (!loading) {
    promise.deliver(ready{req, 0, s.core->model().device_available()});
  } else if (o.prefetch == prefetch_policy::best_effort) {
    // Schedulable at once: its admission uses whatever has landed by then.
    s.core->note_ready_early(false);
    promise.deliver(ready{req, s.core->prefetched(req), s.core->model().device_available()});
  } else {
    s.readying.emplace(req, promise);
    if (o.prefetch == prefetch_policy::timeout)
      arm_prefetch_deadline(self, req);
  }
}

caf::result<ready> handle_arrival(self_ptr self, arrival& a) {
  auto& s = self->state;
  request_id req = a.req;
  std::vector<uint64_t> keys =
    a.readmission ? s.core->on_readmission(req, a.target_tokens)
                  : s.core->on_arrival(req, std::move(a.blocks), a.target_tokens);
  if (keys.empty())
    return ready{req, 0, s.core->model().device_available()};
  auto promise = self->make_response_promise<ready>();
  // Storage that cannot answer holds nothing for this request: it goes on without.
  self->request(s.storage, caf::infinite, exists_query{std::move(keys)})
    .then([=](const exists_reply& r) mutable { handle_exists(self, req, r.leading, promise); },
          [=](const caf::error&) mutable { handle_exists(self, req, 0, promise); });
  return promise;
}

/// A timeout policy deadline: its request becomes ready unless its loads landed first.
void handle_deadline(self_ptr self, uint64_t token) {
  auto& s = self->state;
  auto d = s.deadlines.find(token);
  if (d == s.deadlines.end())
    return;
  request_id req = d->second;
  s.deadlines.erase(d);
  auto it = s.readying.find(req);
  if (it == s.readying.end())
    return;  // its loads landed first
  s.core->note_ready_early(true);
  it->second.deliver(ready{req, s.core->prefetched(req), s.core->model().device_available()});
  s.readying.erase(it);
}

// -- steps ----------------------------------------------------------------------------------------

/// The grant waits for the step's inputs (the header says which), unless none are in flight.
caf::result<grant> handle_commit(self_ptr self, commit& c) {
  auto& s = self->state;
  pending_grant p;
  std::vector<transfer> out;
  s.core->on_commit(c, p.g, out, p.inputs);
  send_transfers(self, out);
  p.waiting = p.inputs.barriers;
  // The step's swap-in: the GPU orders the step's compute after it; modelled, its layers wait
  // on it (layer_pipeline.hpp), once it landed.
  p.g.swap_in = p.inputs.swap_in;
  p.g.swap_in_blocks = p.inputs.swap_in_blocks;
  if (!s.core->options().grant_early && p.inputs.swap_in != 0)
    p.waiting.push_back(p.inputs.swap_in);
  if (p.waiting.empty()) {
    s.core->check_step_start(p.inputs);
    return std::move(p.g);
  }
  // The reply waits for copies: the step's tree work need not wait with it (send_transfers
  // emptied `out`).
  s.core->collect_deferred_work(out);
  send_transfers(self, out);
  p.promise = self->make_response_promise<grant>();
  auto promise = p.promise;
  s.grants.emplace(c.step, std::move(p));
  return promise;
}

// -- PD decode instance and observers -------------------------------------------------------------

preallocation_result handle_preallocation(self_ptr self, const preallocation& p) {
  std::vector<transfer> out;
  preallocation_result r = self->state.core->preallocate(p, out);
  send_transfers(self, out);
  return r;
}

controller_report handle_report(self_ptr self) {
  auto& s = self->state;
  std::vector<transfer> out;
  s.core->collect_deferred_work(out);
  send_transfers(self, out);
  s.core->check(s.core->idle());
  return s.core->report();
}

cache_controller_actor::behavior_type controller_behavior(self_ptr self, cache_options cache,
                                                          controller_options options,
                                                          storage_actor storage,
                                                          transfer_engine_actor engine) {
  auto& st = self->state;
  st.core = std::make_unique<controller_core>(cache, options);
  st.storage = std::move(storage);
  st.engine = std::move(engine);
  return {
    [=](arrival& a) -> caf::result<ready> { return handle_arrival(self, a); },
    [=](wake_atom, uint64_t token) { handle_deadline(self, token); },
    [=](tree_work_atom) {
      std::vector<transfer> out;
      self->state.core->collect_deferred_work(out);
      send_transfers(self, out);
    },
    [=](probe& p) -> probe_reply { return self->state.core->on_probe(p); },
    [=](commit& c) -> caf::result<grant> { return handle_commit(self, c); },
    [=](const prefix_lookup& q) -> prefix_hit { return self->state.core->lookup(q.blocks); },
    [=](const preallocation& p) -> preallocation_result { return handle_preallocation(self, p); },
    [=](caf::get_atom) -> bool { return self->state.core->idle(); },
    [=](report_atom) -> controller_report { return handle_report(self); },
  };
}

}  // namespace

cache_controller_actor spawn_cache_controller(caf::actor_system& sys, const cache_options& cache,
                                              const controller_options& options,
                                              storage_actor storage,
                                              transfer_engine_actor engine) {
  return sys.spawn(controller_behavior, cache, options, std::move(storage), std::move(engine));
}

}  // namespace kvtier
