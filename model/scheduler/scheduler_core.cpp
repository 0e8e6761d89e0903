#include "model/scheduler/scheduler_core.hpp"

#include <algorithm>

#include "model/scheduler/layer_pipeline.hpp"
#include "core/check.hpp"
#include "core/time_math.hpp"

namespace kvtier {

scheduler_core::scheduler_core(const scheduler_core_options& o, step_compute compute,
                               now_source now)
  : st_(o, std::move(now)), compute_(compute), prefill_(o) {}

// -- the front end --------------------------------------------------------------------------------

std::optional<request_done> scheduler_core::on_arrival(request_arrival& a,
                                                       scheduler_orders& out) {
  int64_t now = st_.now();
  request_id id = a.req.seq;
  if (a.handoff.reroutes > 0) {
    // Its last pass here may not have been committed yet: the controller lets that pass's blocks
    // go at this arrival instead (a later commit must not forget the new pass).
    st_.finished.erase(std::remove(st_.finished.begin(), st_.finished.end(), id),
                       st_.finished.end());
  }
  live_request& x = st_.book.add(a.req, a.blocks, st_.options.options.block_size,
                                 a.handoff.reroutes);
  if (a.handoff.active)
    x.output = x.record.output_tokens = 1;  // decoding is the decode instance's
  // Its KV at the last step covers the prompt and every generated token but the last one.
  if (x.layout.blocks_for(x.prompt + uint64_t{x.output} - 1) > st_.options.device_blocks) {
    ++st_.report.rejected;  // it could never be held on the device whole
    x.record.rejected = true;
    return request_done{id, now, true};
  }
  if (a.handoff.active)
    prefill_.expect(x, a, st_);
  else
    st_.expect_output(x, a);
  ++st_.awaiting_ready;
  st_.unanswered.insert(id);
  out.push_back(arrival{id, std::move(a.blocks), false, x.target()});
  return std::nullopt;
}

std::optional<preallocate_reply> scheduler_core::on_preallocate(const preallocate_request& p,
                                                                preallocation& ask) {
  return decode_.on_preallocate(p, st_, ask);
}

preallocate_reply scheduler_core::on_preallocated(const preallocation_result& res,
                                                  const request_arrival& a) {
  return decode_.on_preallocated(res, a, st_);
}

bool scheduler_core::on_kv_handoff(const kv_handoff& k, scheduler_orders& out) {
  return decode_.on_kv_handoff(k, st_, out);
}

// -- replies and timers ---------------------------------------------------------------------------

void scheduler_core::on_ready(const ready& r, scheduler_orders& out) {
  --st_.awaiting_ready;
  st_.known_available = r.available_blocks;
  const request_record& mine = st_.book.at(r.req).record;
  st_.book.at(r.req).record.ready_ns = st_.now();
  // Requests ready at the same instant queue in arrival order (first come, first served), not in
  // the order their answers came: one with nothing to look up in storage answers at once.
  auto& waiting = st_.book.waiting;
  auto at = waiting.end();
  while (at != waiting.begin()) {
    const request_record& q = st_.book.at(*std::prev(at)).record;
    bool later = q.arrival_ns > mine.arrival_ns
                 || (q.arrival_ns == mine.arrival_ns && q.req > mine.req);
    if (q.ready_ns != st_.now() || q.admitted_ns >= 0 || !later)
      break;
    --at;
  }
  waiting.insert(at, r.req);
  st_.request_plan(out);
}

void scheduler_core::on_refetched(const ready& r, scheduler_orders& out) {
  --st_.awaiting_ready;
  st_.book.at(r.req).refetching = false;
  st_.known_available = r.available_blocks;
  st_.request_plan(out);
}

void scheduler_core::on_step_timer(uint64_t step, scheduler_orders& out) {
  if (step == 0) {  // the plan tick
    KVTIER_ASSERT(st_.steps.phase() == step_phase::plan_set);
    st_.steps.move_to(step_phase::idle);
    maybe_step(out);
    return;
  }
  end_step(step, out);
}

void scheduler_core::on_compute_done(uint64_t step, int64_t stall_ns, scheduler_orders& out) {
  // Only a step that follows a swap-in waits for copies, as the modelled pipeline charges it;
  // the gaps between the layers of the other steps are the host's (docs/gpu.md).
  (step_after_swap_in_ ? st_.report.layer_wait_ns : st_.report.layer_gap_ns) += stall_ns;
  st_.report.busy_ns += st_.now() - step_start_;
  if (st_.options.log_steps) {
    gpu_step_.end_ns = st_.now();
    gpu_step_.layer_wait_ns = step_after_swap_in_ ? stall_ns : 0;
    st_.report.step_log.push_back(gpu_step_);
  }
  end_step(step, out);
}

void scheduler_core::on_handoff_timer(request_id id, scheduler_orders& out) {
  if (decode_.dropping(id))
    decode_.check_drop_written(id, out);  // a dropped victim's save: ask storage again
  else
    prefill_.on_timer(id, st_, out);
}

void scheduler_core::on_transfer_done(transfer_use use, request_id id, const transfer_done& d,
                                      scheduler_orders& out) {
  switch (use) {
    case transfer_use::background: return;
    case transfer_use::handoff_store: prefill_.stored(id, d.ok, st_, out); return;
    case transfer_use::output_store: st_.output_written(id, out); return;
    case transfer_use::handoff_load: decode_.loaded(id, d.ok, st_, out); return;
    case transfer_use::handoff_swap_in: decode_.swapped_in(id, st_, out); return;
  }
}

void scheduler_core::on_exists(exists_use use, request_id id, const exists_reply& r,
                               scheduler_orders& out) {
  if (use == exists_use::handoff_visible)
    prefill_.visible(id, r.leading, st_, out);
  else if (use == exists_use::handoff_stored)
    prefill_.already_stored(id, r.leading, st_, out);
  else
    decode_.drop_visible(id, r.leading, st_, out);
}

// -- the step loop --------------------------------------------------------------------------------

// Only ever called with nothing in flight: from the plan tick, a grant without work, a step's end.
void scheduler_core::maybe_step(scheduler_orders& out) {
  KVTIER_ASSERT(!st_.steps.busy());
  decode_.start_ready(st_.book);
  plan_running(st_.book, st_.options.options, plan_);
  probe p;
  bool ask = needs_probe(st_.book, st_.options.options, plan_, st_.known_available,
                         st_.reserve.blocks(), p);
  if (!ask && plan_.items.empty() && st_.finished.empty() && st_.computed.empty())
    return;
  st_.steps.move_to(step_phase::planning);
  plan_start_ = st_.now();
  if (!ask) {
    continue_plan(nullptr, out);
    return;
  }
  st_.steps.move_to(step_phase::probing);
  p.step = step_ + 1;
  ++st_.report.probes;
  out.push_back(std::move(p));
}

void scheduler_core::on_probe_reply(const probe_reply& r, scheduler_orders& out) {
  KVTIER_ASSERT(st_.steps.phase() == step_phase::probing);
  note_matches(st_.book, r, plan_.budget_left);
  start_refetches(r, out);
  continue_plan(&r, out);
}

// save_to_storage: a preempted request whose probe finds fewer of its saved blocks in the tiers
// than it saved has the controller look the rest up in storage (and prefetch them) before it
// is admitted; it keeps its place at the head of the queue meanwhile. So does a request whose
// tiers lost blocks it had cached when it became ready (once per wait: docs/design.md).
void scheduler_core::start_refetches(const probe_reply& reply, scheduler_orders& out) {
  for (const candidate_match& m : reply.matches) {
    live_request& r = st_.book.at(m.req);
    bool saved_lost = r.refetch_due && m.device_blocks + m.host_blocks < r.saved_blocks;
    bool ready_lost = !r.looked_up_again && m.lost_blocks > 0;
    if (!saved_lost && !ready_lost)
      continue;
    r.refetch_due = false;
    r.looked_up_again = true;
    r.refetching = true;
    ++st_.awaiting_ready;
    arrival a;
    a.req = m.req;
    a.readmission = true;
    a.target_tokens = r.target();
    out.push_back(std::move(a));
  }
}

void scheduler_core::continue_plan(const probe_reply* reply, scheduler_orders& out) {
  uint32_t available = reply ? reply->available_blocks : st_.known_available;
  plan_rest(st_.book, st_.options.options, st_.reserve, available, reply, plan_);
  bool work = !plan_.items.empty() || !plan_.preempted.empty();
  if (!work && st_.finished.empty() && st_.computed.empty()) {
    st_.steps.move_to(step_phase::idle);  // nothing fits now: wait for an arrival or a step
    return;
  }
  send_commit(out);
}

void scheduler_core::send_commit(scheduler_orders& out) {
  commit c;
  c.step = ++step_;
  bool bookkeeping = !st_.finished.empty() || !st_.computed.empty();
  st_.steps.move_to(bookkeeping ? step_phase::committing_bookkeeping : step_phase::committing);
  c.finished = std::move(st_.finished);
  c.computed = std::move(st_.computed);
  for (request_id id : plan_.preempted)
    c.preempted.push_back({id, static_cast<uint32_t>(st_.book.at(id).computed)});
  c.grows = plan_.grows;
  c.admits = plan_.admits;
  c.drop_preempted = !c.preempted.empty() && decode_side::drops_victims(st_.options);
  st_.finished.clear();
  st_.computed.clear();
  step_start_ = st_.now();
  note_lag(step_start_ - plan_start_);
  step_due_ = -1;
  out.push_back(std::move(c));
}

// Tokens that re-admitted requests found cached, by tier: what a preemption mode restores.
void scheduler_core::note_restored(const grant& g) {
  for (const admit_result& a : g.admits) {
    if (!a.admitted || st_.book.at(a.req).record.preemptions == 0)
      continue;
    at(st_.report.restored_tokens, tier::device) += a.device_tokens;
    at(st_.report.restored_tokens, tier::host) += a.host_tokens;
    at(st_.report.restored_tokens, tier::storage) += a.storage_tokens;
  }
}

void scheduler_core::on_grant(const grant& g, scheduler_orders& out) {
  note_restored(g);
  apply_grant(st_.book, st_.options.options, plan_, g, step_start_, items_);
  st_.known_available = g.available_blocks;
  if (!plan_.preempted.empty()) {
    st_.reserve.after_preemption();
    st_.report.preemptions += plan_.preempted.size();
    if (decode_side::drops_victims(st_.options))
      decode_.drop_victims(plan_.preempted, g, st_, out);
  }
  if (items_.empty()) {
    // Only bookkeeping or preemption happened: plan again, now that blocks were freed. The
    // controller may refuse an admission when its blocks went to others between probe and
    // commit; that is planned again once, with the grant's count. A plan that changed nothing
    // waits for the next event instead: planning it again at this instant would loop forever.
    bool refused = !plan_.admits.empty();  // none was admitted, or items would not be empty
    bool again = st_.steps.granted_nothing(!plan_.preempted.empty(), refused);
    if (refused)
      ++st_.report.refused_admissions;
    if (again)
      maybe_step(out);
    return;
  }
  st_.steps.granted_work();
  compute(g, out);
}

void scheduler_core::compute(const grant& g, scheduler_orders& out) {
  batch_shape shape;
  for (const work_item& w : items_) {
    const live_request& r = *w.request;
    if (r.decoding() && w.tokens == 1)
      shape.add_decode(w.start + 1);
    else
      shape.add_prefill(w.start, w.tokens);
  }
  const compute_profile& profile = st_.options.compute;
  step_cost cost = cost_of(profile, shape);
  st_.reserve.after_step();
  ++st_.report.steps;
  if (compute_ == step_compute::gpu) {
    compute_on_gpu(g, cost, out);
    return;
  }
  std::vector<int64_t>* layer_ends = prefill_.layer_end_sink();
  int64_t layer_wait = g.swap_in != 0 ? profile.layer_wait_ns : 0;
  int64_t submitted = time_add(step_start_, g.swap_in != 0
                                              ? profile.swap_in_submit_ns_per_block
                                                  * static_cast<int64_t>(g.swap_in_blocks)
                                              : 0);
  pipeline_result p = run_pipeline(submitted, cost, profile.layers, g.layer_ready_ns,
                                   layer_ends, layer_wait, g.reused_ready_ns);
  if (layer_ends)
    prefill_.step_computed(items_);
  step_due_ = p.end_ns;
  st_.report.layer_wait_ns += p.stall_ns;
  st_.report.reuse_wait_ns += p.reuse_wait_ns;
  st_.report.busy_ns += p.end_ns - step_start_;
  if (st_.options.log_steps)
    st_.report.step_log.push_back(
      {step_, step_start_, time_add(submitted, cost.overhead_ns) + p.reuse_wait_ns, p.end_ns,
       g.swap_in, p.stall_ns, p.reuse_wait_ns});
  out.push_back(timer_order{timer_kind::step_end, p.end_ns, step_});
}

// The same step as busy kernels on the GPU: the overhead first, then layer by layer, each layer
// waiting for its part of the swap-in (as layer_pipeline.hpp computes it). The grant came once
// the copies still reading reused blocks were done; the overhead overlaps that wait, as in the
// model, so what of it has passed since the commit is not spun again.
void scheduler_core::compute_on_gpu(const grant& g, const step_cost& cost,
                                    scheduler_orders& out) {
  const compute_profile& profile = st_.options.compute;
  int64_t now = st_.now();
  int64_t lead_end = time_add(step_start_, cost.overhead_ns);
  int64_t reuse_wait = std::max<int64_t>(0, g.reused_ready_ns - lead_end);
  st_.report.reuse_wait_ns += reuse_wait;
  compute_request c;
  c.step = step_;
  c.after_swap_in = g.swap_in;
  step_after_swap_in_ = g.swap_in != 0;
  c.lead_ns = std::max<int64_t>(0, lead_end - now);
  c.layer_ns.assign(profile.layers, cost.layer_ns);
  c.layer_ns.back() = cost.last_layer_ns;
  gpu_step_ = {step_, step_start_, std::max(now, lead_end), 0, g.swap_in, 0, reuse_wait};
  out.push_back(std::move(c));
}

void scheduler_core::end_step(uint64_t step, scheduler_orders& out) {
  KVTIER_ASSERT(st_.steps.phase() == step_phase::computing && step == step_);
  int64_t now = st_.now();
  if (step_due_ >= 0)
    note_lag(now - step_due_);
  step_outcome o = finish_step(st_.book, items_, now);
  items_.clear();
  st_.report.prefill_tokens += o.prefill_tokens;
  st_.report.decode_tokens += o.decode_tokens;
  st_.report.recomputed_tokens += o.recomputed_tokens;
  st_.computed.insert(st_.computed.end(), o.computed.begin(), o.computed.end());
  for (request_id id : o.finished) {
    if (st_.options.role == pd_role::prefill)
      prefill_.begin(id, now, st_, out);  // its blocks are released once they have been sent
    else
      st_.finish(id, out);
  }
  st_.steps.move_to(step_phase::idle);
  maybe_step(out);
}

// On the wall clock the host's own time passes on the replay's clock too (`speed` times over):
// what planning took, and how late a step's end was handled, is counted as lag.
void scheduler_core::note_lag(int64_t ns) {
  if (ns <= 0)
    return;
  st_.report.lag_ns = time_add(st_.report.lag_ns, ns);
  st_.report.lag_max_ns = std::max(st_.report.lag_max_ns, ns);
}

// -- observers ------------------------------------------------------------------------------------

scheduler_report scheduler_core::report() const {
  scheduler_report r = st_.report;
  r.drained = !st_.steps.busy() && st_.unanswered.empty() && st_.awaiting_ready == 0
              && st_.book.running.empty() && st_.book.waiting.empty() && st_.finished.empty()
              && decode_.idle() && prefill_.idle() && st_.writing_outputs == 0;
  for (const auto& [id, x] : st_.book.all())
    r.requests.push_back(x.record);
  r.requests.insert(r.requests.end(), st_.book.retired().begin(), st_.book.retired().end());
  std::sort(r.requests.begin(), r.requests.end(),
            [](const request_record& a, const request_record& b) {
              return a.req != b.req ? a.req < b.req : a.attempt < b.attempt;
            });
  prefill_.fill(r);
  return r;
}

}  // namespace kvtier
