#include "actors/scheduler/scheduler.hpp"

#include <memory>
#include <string>

#include <absl/container/flat_hash_map.h>

#include "model/scheduler/scheduler_core.hpp"
#include "core/check.hpp"

namespace kvtier {

namespace {

struct scheduler_actor_state {
  static inline const char* name = "scheduler";
  scheduler_config config;
  std::unique_ptr<scheduler_core> core;
  cache_controller_actor controller;
  // requests in this instance, answered when they finish
  absl::flat_hash_map<request_id, caf::typed_response_promise<request_done>> answers;
};

using self_ptr = scheduler_actor::stateful_pointer<scheduler_actor_state>;

// A failed reply means a peer actor is gone or broken: this instance cannot go on, and its
// requests' answers carry the error to the front end.
void fail(self_ptr self, const caf::error& e) {
  self->quit(e);
}

void carry_out(self_ptr self, scheduler_orders& out);

// Runs one core call and carries out what it ordered.
template <class Call>
void with_core(self_ptr self, Call&& call) {
  scheduler_orders out;
  call(*self->state.core, out);
  carry_out(self, out);
}

// The orders go out in the core's order: a virtual replay's results depend on it.
void carry_out(self_ptr self, scheduler_orders& out) {
  auto& st = self->state;
  auto on_error = [=](const caf::error& e) { fail(self, e); };
  for (scheduler_order& order : out) {
    if (auto* p = std::get_if<probe>(&order)) {
      self->request(st.controller, caf::infinite, std::move(*p))
        .then([=](const probe_reply& r) { with_core(self, [&](auto& c, auto& o) {
                c.on_probe_reply(r, o); }); },
              on_error);
    } else if (auto* c = std::get_if<commit>(&order)) {
      self->request(st.controller, caf::infinite, std::move(*c))
        .then([=](const grant& g) { with_core(self, [&](auto& k, auto& o) { k.on_grant(g, o); }); },
              on_error);
    } else if (auto* a = std::get_if<arrival>(&order)) {
      bool readmission = a->readmission;
      self->request(st.controller, caf::infinite, std::move(*a))
        .then([=](const ready& r) {
                with_core(self, [&](auto& k, auto& o) {
                  if (readmission)
                    k.on_refetched(r, o);
                  else
                    k.on_ready(r, o);
                });
              },
              on_error);
    } else if (auto* e = std::get_if<engine_order>(&order)) {
      transfer_use use = e->use;
      request_id req = e->req;
      self->request(st.config.engine, caf::infinite, std::move(e->t))
        .then([=](const transfer_done& d) {
                with_core(self, [&](auto& k, auto& o) { k.on_transfer_done(use, req, d, o); });
              },
              on_error);
    } else if (auto* s = std::get_if<storage_order>(&order)) {
      exists_use use = s->use;
      request_id req = s->req;
      self->request(st.config.storage, caf::infinite, std::move(s->query))
        .then([=](const exists_reply& r) {
                with_core(self, [&](auto& k, auto& o) { k.on_exists(use, req, r, o); });
              },
              on_error);
    } else if (auto* g = std::get_if<compute_request>(&order)) {
      uint64_t step = g->step;
      self->request(st.config.gpu_compute, caf::infinite, std::move(*g))
        .then([=](const compute_done& d) {
                if (!d.ok) {
                  fail(self, caf::make_error(caf::sec::runtime_error,
                                             "GPU compute of step " + std::to_string(step) + ": "
                                               + d.error));
                  return;
                }
                with_core(self, [&](auto& k, auto& o) { k.on_compute_done(step, d.stall_ns, o); });
              },
              on_error);
    } else if (auto* t = std::get_if<timer_order>(&order)) {
      if (t->kind == timer_kind::plan)
        self->delayed_send(self, caf::timespan{0}, step_atom_v, uint64_t{0});
      else if (t->kind == timer_kind::step_end)
        self->delayed_send(self, st.config.clock.until(self->clock(), t->at_ns), step_atom_v,
                           t->id);
      else
        self->delayed_send(self, st.config.clock.until(self->clock(), t->at_ns), handoff_atom_v,
                           t->id);
    } else {
      request_done& d = std::get<answer_order>(order).done;
      auto it = st.answers.find(d.req);
      KVTIER_ASSERT(it != st.answers.end());
      it->second.deliver(std::move(d));
      st.answers.erase(it);
    }
  }
  out.clear();
}

caf::result<request_done> on_arrival(self_ptr self, request_arrival& a) {
  request_id id = a.req.seq;
  scheduler_orders out;
  if (auto rejected = self->state.core->on_arrival(a, out))
    return *rejected;
  carry_out(self, out);
  auto promise = self->make_response_promise<request_done>();
  self->state.answers.emplace(id, promise);
  return promise;
}

caf::result<preallocate_reply> on_preallocate(self_ptr self, preallocate_request& p) {
  preallocation ask;
  if (auto refused = self->state.core->on_preallocate(p, ask))
    return *refused;
  auto promise = self->make_response_promise<preallocate_reply>();
  self->request(self->state.controller, caf::infinite, std::move(ask))
    .then(
      [=, a = std::move(p.arrival)](const preallocation_result& res) mutable {
        promise.deliver(self->state.core->on_preallocated(res, a));
      },
      [=](const caf::error& e) mutable {
        promise.deliver(e);
        fail(self, e);
      });
  return promise;
}

caf::result<request_done> on_kv_handoff(self_ptr self, kv_handoff& k) {
  scheduler_orders out;
  if (!self->state.core->on_kv_handoff(k, out))
    return caf::make_error(caf::sec::runtime_error,
                           "kv_handoff: request " + std::to_string(k.req)
                             + " is not preallocated here");
  auto promise = self->make_response_promise<request_done>();
  self->state.answers.emplace(k.req, promise);
  carry_out(self, out);
  return promise;
}

scheduler_actor::behavior_type scheduler_behavior(self_ptr self, scheduler_config config,
                                                  cache_controller_actor controller) {
  auto& st = self->state;
  st.config = config;
  step_compute compute = config.gpu_compute ? step_compute::gpu : step_compute::modelled;
  st.core = std::make_unique<scheduler_core>(config, compute, [self] {
    return self->state.config.clock.now(self->clock());
  });
  st.controller = std::move(controller);
  return {
    [=](request_arrival& a) { return on_arrival(self, a); },
    [=](preallocate_request& p) { return on_preallocate(self, p); },
    [=](kv_handoff& k) { return on_kv_handoff(self, k); },
    [=](handoff_atom, uint64_t req) {
      with_core(self, [&](auto& k, auto& o) { k.on_handoff_timer(req, o); });
    },
    [=](step_atom, uint64_t step) {  // 0: a plan tick
      with_core(self, [&](auto& k, auto& o) { k.on_step_timer(step, o); });
    },
    [=](report_atom) -> scheduler_report { return self->state.core->report(); },
  };
}

}  // namespace

scheduler_actor spawn_scheduler(caf::actor_system& sys, const scheduler_config& config,
                                cache_controller_actor controller) {
  return sys.spawn(scheduler_behavior, config, std::move(controller));
}

}  // namespace kvtier
