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
  // The order list of the last core call, kept for its capacity: every message of a replay's
  // step loop makes one (taken while a call runs, so a nested call would start its own).
  scheduler_orders spare_orders;
};

using self_ptr = scheduler_actor::stateful_pointer<scheduler_actor_state>;

// A failed reply means a peer actor is gone or broken: this instance cannot go on, and its
// requests' answers carry the error to the front end.
void fail(self_ptr self, const caf::error& e) {
  self->quit(e);
}

void carry_out(self_ptr self, scheduler_orders& out);

// Makes one core call (its arguments but the orders) and carries out what it ordered.
template <class... Params, class... Args>
void call_core(self_ptr self, void (scheduler_core::*call)(Params...), Args&&... args) {
  scheduler_orders out = std::move(self->state.spare_orders);
  out.clear();
  (self->state.core.get()->*call)(std::forward<Args>(args)..., out);
  carry_out(self, out);
  self->state.spare_orders = std::move(out);
}

// Sends one order, its reply going back to the core.
struct order_sender {
  self_ptr self;

  void operator()(probe& p) const {
    request(self->state.controller, std::move(p), [s = self](const probe_reply& r) {
      call_core(s, &scheduler_core::on_probe_reply, r);
    });
  }
  void operator()(commit& c) const {
    request(self->state.controller, std::move(c),
            [s = self](const grant& g) { call_core(s, &scheduler_core::on_grant, g); });
  }
  void operator()(arrival& a) const {
    auto then = a.readmission ? &scheduler_core::on_refetched : &scheduler_core::on_ready;
    request(self->state.controller, std::move(a),
            [s = self, then](const ready& r) { call_core(s, then, r); });
  }
  void operator()(engine_order& e) const {
    request(self->state.config.engine, std::move(e.t),
            [s = self, use = e.use, req = e.req](const transfer_done& d) {
              call_core(s, &scheduler_core::on_transfer_done, use, req, d);
            });
  }
  void operator()(storage_order& q) const {
    request(self->state.config.storage, std::move(q.query),
            [s = self, use = q.use, req = q.req](const exists_reply& r) {
              call_core(s, &scheduler_core::on_exists, use, req, r);
            });
  }
  void operator()(compute_request& c) const {
    request(self->state.config.gpu_compute, std::move(c),
            [s = self, step = c.step](const compute_done& d) {
              if (!d.ok) {
                fail(s, caf::make_error(caf::sec::runtime_error, "GPU compute of step "
                                                                   + std::to_string(step) + ": "
                                                                   + d.error));
                return;
              }
              call_core(s, &scheduler_core::on_compute_done, step, d.stall_ns);
            });
  }
  void operator()(timer_order& t) const {
    const sim_clock& clock = self->state.config.clock;
    if (t.kind == timer_kind::plan)
      self->delayed_send(self, caf::timespan{0}, step_atom_v, uint64_t{0});
    else if (t.kind == timer_kind::step_end)
      self->delayed_send(self, clock.until(self->clock(), t.at_ns), step_atom_v, t.id);
    else
      self->delayed_send(self, clock.until(self->clock(), t.at_ns), handoff_atom_v, t.id);
  }
  void operator()(answer_order& a) const {
    auto& answers = self->state.answers;
    auto it = answers.find(a.done.req);
    KVTIER_ASSERT(it != answers.end());
    it->second.deliver(std::move(a.done));
    answers.erase(it);
  }

  template <class Peer, class Message, class OnReply>
  void request(const Peer& peer, Message&& m, OnReply on_reply) const {
    self->request(peer, caf::infinite, std::forward<Message>(m))
      .then(std::move(on_reply), [s = self](const caf::error& e) { fail(s, e); });
  }
};

// The orders go out in the core's order: a virtual replay's results depend on it.
void carry_out(self_ptr self, scheduler_orders& out) {
  for (scheduler_order& order : out)
    std::visit(order_sender{self}, order);
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
      call_core(self, &scheduler_core::on_handoff_timer, req);
    },
    [=](step_atom, uint64_t step) {  // 0: a plan tick
      call_core(self, &scheduler_core::on_step_timer, step);
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
