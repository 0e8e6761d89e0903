#include "actors/scheduler/scheduler.hpp"

#include <algorithm>
#include <memory>

#include <absl/container/flat_hash_map.h>

#include "actors/scheduler/layer_pipeline.hpp"
#include "core/check.hpp"
#include "core/time_math.hpp"

namespace kvtier {

namespace {

struct scheduler_state {
  static inline const char* name = "scheduler";
  scheduler_config config;
  std::unique_ptr<output_reserve> reserve;
  cache_controller_actor controller;
  request_book book;
  // the step in flight
  bool busy = false;
  uint64_t step = 0;
  step_plan plan;
  std::vector<work_item> items;
  int64_t step_start = 0;
  int64_t plan_start = 0;         // when planning the step began
  int64_t step_due = -1;          // when the modelled step ends (-1: not granted yet, or GPU)
  uint32_t known_available = 0;
  // what the next commit reports
  std::vector<token_mark> computed;
  std::vector<request_id> finished;
  bool bookkeeping_sent = false;  // the commit in flight released or committed blocks
  bool plan_pending = false;      // a plan tick is set for this instant
  bool retrying_refusal = false;  // the commit in flight replans a refused admission
  // requests in this instance, answered when they finish
  absl::flat_hash_map<request_id, caf::typed_response_promise<request_done>> answers;
  uint64_t awaiting_ready = 0;
  scheduler_report report;
};

using self_ptr = scheduler_actor::stateful_pointer<scheduler_state>;

int64_t now_of(self_ptr self) {
  return self->state.config.clock.now(self->clock());
}

void maybe_step(self_ptr self);

// A failed reply means a peer actor is gone or broken: this instance cannot go on, and its
// requests' answers carry the error to the front end.
void fail(self_ptr self, const caf::error& e) {
  self->quit(e);
}

// On the wall clock the host's own time passes on the replay's clock too (`speed` times over):
// what planning took, and how late a step's end was handled, is counted as lag.
void note_lag(scheduler_state& st, int64_t ns) {
  if (ns <= 0)
    return;
  st.report.lag_ns = time_add(st.report.lag_ns, ns);
  st.report.lag_max_ns = std::max(st.report.lag_max_ns, ns);
}

// Plans once everything else that happens at this instant has been handled (a timer at the
// current time fires only after every pending message), so requests that become ready together
// are planned together, as an engine loop sees its whole waiting queue.
void request_plan(self_ptr self) {
  auto& st = self->state;
  if (st.busy || st.plan_pending)
    return;
  st.plan_pending = true;
  self->delayed_send(self, caf::timespan{0}, step_atom_v, uint64_t{0});
}

void on_ready(self_ptr self, const ready& r) {
  auto& st = self->state;
  --st.awaiting_ready;
  st.known_available = r.available_blocks;
  st.book.at(r.req).record.ready_ns = now_of(self);
  st.book.waiting.push_back(r.req);
  request_plan(self);
}

caf::result<request_done> on_arrival(self_ptr self, request_arrival& a) {
  auto& st = self->state;
  int64_t now = now_of(self);
  request_id id = a.req.seq;
  live_request& x = st.book.add(a.req, a.blocks, st.config.options.block_size);
  // Its KV at the last step covers the prompt and every generated token but the last one.
  if (x.layout.blocks_for(x.prompt + uint64_t{x.output} - 1) > st.config.device_blocks) {
    ++st.report.rejected;  // it could never be held on the device whole
    x.record.rejected = true;
    return request_done{id, now, true};
  }
  ++st.awaiting_ready;
  self->request(st.controller, caf::infinite, arrival{id, std::move(a.blocks)})
    .then([=](const ready& rd) { on_ready(self, rd); },
          [=](const caf::error& e) { fail(self, e); });
  auto promise = self->make_response_promise<request_done>();
  st.answers.emplace(id, promise);
  return promise;
}

void on_step_end(self_ptr self, uint64_t step);

// Tokens that re-admitted requests found cached, by tier: what a preemption mode restores.
void note_restored(scheduler_state& st, const grant& g) {
  for (const admit_result& a : g.admits) {
    if (!a.admitted || st.book.at(a.req).record.preemptions == 0)
      continue;
    st.report.restored_tokens[0] += a.device_tokens;
    st.report.restored_tokens[1] += a.host_tokens;
    st.report.restored_tokens[2] += a.storage_tokens;
  }
}

// save_to_storage: a preempted request whose probe finds fewer of its saved blocks in the tiers
// than it saved has the controller look the rest up in storage (and prefetch them) before it
// is admitted; it keeps its place at the head of the queue meanwhile.
void start_refetches(self_ptr self, const probe_reply& reply) {
  auto& st = self->state;
  for (const candidate_match& m : reply.matches) {
    live_request& r = st.book.at(m.req);
    if (!r.refetch_due || m.device_blocks + m.host_blocks >= r.saved_blocks)
      continue;
    r.refetch_due = false;
    r.refetching = true;
    ++st.awaiting_ready;
    arrival a;
    a.req = m.req;
    a.readmission = true;
    self->request(st.controller, caf::infinite, std::move(a))
      .then([=](const ready& rd) {
        auto& s = self->state;
        --s.awaiting_ready;
        s.book.at(rd.req).refetching = false;
        s.known_available = rd.available_blocks;
        request_plan(self);
      },
      [=](const caf::error& e) { fail(self, e); });
  }
}

void on_grant(self_ptr self, const grant& g) {
  auto& st = self->state;
  note_restored(st, g);
  st.items = apply_grant(st.book, st.config.options, st.plan, g, st.step_start);
  st.known_available = g.available_blocks;
  if (!st.plan.preempted.empty()) {
    st.reserve->after_preemption();
    st.report.preemptions += st.plan.preempted.size();
  }
  if (st.items.empty()) {
    // Only bookkeeping or preemption happened: plan again, now that blocks were freed. The
    // controller may refuse an admission when its blocks went to others between probe and
    // commit; that is planned again once, with the grant's count. A plan that changed nothing
    // waits for the next event instead: planning it again at this instant would loop forever.
    st.busy = false;
    bool freed = !st.plan.preempted.empty() || st.bookkeeping_sent;
    bool refused = !st.plan.admits.empty();  // none was admitted, or items would not be empty
    bool retry = freed || (refused && !st.retrying_refusal);
    st.retrying_refusal = retry && !freed;
    if (refused)
      ++st.report.refused_admissions;
    if (retry)
      maybe_step(self);
    return;
  }
  st.retrying_refusal = false;
  batch_shape shape;
  for (const work_item& w : st.items) {
    const live_request& r = st.book.at(w.req);
    if (r.decoding() && w.tokens == 1)
      shape.add_decode(w.start + 1);
    else
      shape.add_prefill(w.start, w.tokens);
  }
  step_cost cost = cost_of(st.config.compute, shape);
  st.reserve->after_step();
  ++st.report.steps;
  if (st.config.gpu_compute) {
    // The same step as busy kernels on the GPU: the overhead first, then layer by layer, each
    // layer waiting for its part of the swap-in (as layer_pipeline.hpp computes it).
    compute_request c;
    c.step = st.step;
    c.after_swap_in = g.swap_in;
    c.lead_ns = cost.overhead_ns;
    c.layer_ns.assign(st.config.compute.layers, cost.layer_ns);
    c.layer_ns.back() = cost.last_layer_ns;
    uint64_t step = st.step;
    self->request(st.config.gpu_compute, caf::infinite, std::move(c))
      .then([=](const compute_done& d) {
        auto& s = self->state;
        if (!d.ok) {
          fail(self, caf::make_error(caf::sec::runtime_error,
                                     "GPU compute of step " + std::to_string(step) + ": " + d.error));
          return;
        }
        s.report.layer_wait_ns += d.stall_ns;
        s.report.busy_ns += now_of(self) - s.step_start;
        on_step_end(self, step);
      },
      [=](const caf::error& e) { fail(self, e); });
    return;
  }
  pipeline_result p = run_pipeline(st.step_start, cost, st.config.compute.layers, g.layer_ready_ns);
  st.step_due = p.end_ns;
  st.report.layer_wait_ns += p.stall_ns;
  st.report.busy_ns += p.end_ns - st.step_start;
  self->delayed_send(self, st.config.clock.until(self->clock(), p.end_ns), step_atom_v, st.step);
}

void send_commit(self_ptr self) {
  auto& st = self->state;
  commit c;
  c.step = ++st.step;
  st.bookkeeping_sent = !st.finished.empty() || !st.computed.empty();
  c.finished = std::move(st.finished);
  c.computed = std::move(st.computed);
  for (request_id id : st.plan.preempted)
    c.preempted.push_back({id, static_cast<uint32_t>(st.book.at(id).computed)});
  c.grows = st.plan.grows;
  c.admits = st.plan.admits;
  st.finished.clear();
  st.computed.clear();
  st.step_start = now_of(self);
  note_lag(st, st.step_start - st.plan_start);
  st.step_due = -1;
  self->request(st.controller, caf::infinite, std::move(c))
    .then([=](const grant& g) { on_grant(self, g); },
          [=](const caf::error& e) { fail(self, e); });
}

void continue_plan(self_ptr self, const probe_reply* reply) {
  auto& st = self->state;
  uint32_t available = reply ? reply->available_blocks : st.known_available;
  plan_rest(st.book, st.config.options, *st.reserve, available, reply, st.plan);
  bool work = !st.plan.items.empty() || !st.plan.preempted.empty();
  if (!work && st.finished.empty() && st.computed.empty()) {
    st.busy = false;  // nothing fits now: wait for an arrival or a finished step
    return;
  }
  send_commit(self);
}

void maybe_step(self_ptr self) {
  auto& st = self->state;
  if (st.busy)
    return;
  st.plan = plan_running(st.book, st.config.options);
  probe p;
  bool ask = needs_probe(st.book, st.config.options, st.plan, st.known_available,
                         st.reserve->blocks(), p);
  if (!ask && st.plan.items.empty() && st.finished.empty() && st.computed.empty())
    return;
  st.busy = true;
  st.plan_start = now_of(self);
  if (!ask) {
    continue_plan(self, nullptr);
    return;
  }
  p.step = st.step + 1;
  ++st.report.probes;
  self->request(st.controller, caf::infinite, std::move(p))
    .then([=](const probe_reply& r) {
      note_matches(self->state.book, r, self->state.plan.budget_left);
      start_refetches(self, r);
      continue_plan(self, &r);
    },
    [=](const caf::error& e) { fail(self, e); });
}

void on_step_end(self_ptr self, uint64_t step) {
  auto& st = self->state;
  if (step == 0) {  // a plan tick
    st.plan_pending = false;
    maybe_step(self);
    return;
  }
  KVTIER_ASSERT(st.busy && step == st.step);
  int64_t now = now_of(self);
  if (st.step_due >= 0)
    note_lag(st, now - st.step_due);
  step_outcome out = finish_step(st.book, st.items, now);
  st.items.clear();
  st.report.prefill_tokens += out.prefill_tokens;
  st.report.decode_tokens += out.decode_tokens;
  st.report.recomputed_tokens += out.recomputed_tokens;
  st.computed.insert(st.computed.end(), out.computed.begin(), out.computed.end());
  st.finished.insert(st.finished.end(), out.finished.begin(), out.finished.end());
  for (request_id id : out.finished) {
    auto answer = st.answers.find(id);
    answer->second.deliver(request_done{id, now, false});
    st.answers.erase(answer);
  }
  st.busy = false;
  maybe_step(self);
}

scheduler_actor::behavior_type scheduler_behavior(self_ptr self, scheduler_config config,
                                                  cache_controller_actor controller) {
  auto& st = self->state;
  st.config = config;
  st.reserve = std::make_unique<output_reserve>(config.options);
  st.controller = std::move(controller);
  st.known_available = config.device_blocks;
  return {
    [=](request_arrival& a) { return on_arrival(self, a); },
    [=](step_atom, uint64_t step) { on_step_end(self, step); },  // 0: a plan tick
    [=](report_atom) -> scheduler_report {
      auto& s = self->state;
      scheduler_report r = s.report;
      r.drained = !s.busy && s.answers.empty() && s.awaiting_ready == 0
                  && s.book.running.empty() && s.book.waiting.empty() && s.finished.empty();
      for (const live_request& x : s.book.all())
        if (x.prompt > 0)
          r.requests.push_back(x.record);
      return r;
    },
  };
}

}  // namespace

scheduler_actor spawn_scheduler(caf::actor_system& sys, const scheduler_config& config,
                                cache_controller_actor controller) {
  return sys.spawn(scheduler_behavior, config, std::move(controller));
}

}  // namespace kvtier
