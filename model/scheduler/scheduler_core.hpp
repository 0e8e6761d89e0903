#pragma once

// The scheduler's logic without the actor: the serving engine's loop. Requests arrive from the
// front end (answered when they finish), become ready once the controller has prefetched what
// storage holds for them, and are batched step by step (batch_planner.hpp). A step is one commit
// to the controller; when the grant comes back the step's compute runs layer by layer
// (cost_model.hpp, layer_pipeline.hpp) and ends on a timer, at which point tokens are sampled
// and finished requests leave. Where the loop stands is a step_phase (step_phase.hpp). A PD
// instance adds its side of the handoff (prefill_side.hpp, decode_side.hpp).
//
// The actor (actors/scheduler/scheduler.hpp) only moves messages in and out: each call takes an
// event and appends to `out` what the actor must then send or set, in order
// (scheduler_orders.hpp); replies come back through the calls below.

#include <cstdint>
#include <optional>
#include <vector>

#include "model/scheduler/decode_side.hpp"
#include "model/scheduler/prefill_side.hpp"
#include "model/scheduler/scheduler_state.hpp"

namespace kvtier {

class scheduler_core {
 public:
  scheduler_core(const scheduler_core_options& o, step_compute compute, now_source now);

  // -- the front end -----------------------------------------------------------------------------

  /// A request arrives. One that could never be held on the device whole is answered at once
  /// (the returned value); any other is sent to the controller and answered when it finishes.
  std::optional<request_done> on_arrival(request_arrival& a, scheduler_orders& out);
  /// PD decode (decode_side.hpp): see there.
  std::optional<preallocate_reply> on_preallocate(const preallocate_request& p,
                                                  preallocation& ask);
  preallocate_reply on_preallocated(const preallocation_result& res, const request_arrival& a);
  bool on_kv_handoff(const kv_handoff& k, scheduler_orders& out);

  // -- replies and timers -------------------------------------------------------------------------

  /// The controller has what storage held for an arrival: the request waits to be admitted.
  void on_ready(const ready& r, scheduler_orders& out);
  /// ... for a save_to_storage victim's refetch (`arrival::readmission`).
  void on_refetched(const ready& r, scheduler_orders& out);
  void on_probe_reply(const probe_reply& r, scheduler_orders& out);
  void on_grant(const grant& g, scheduler_orders& out);
  /// Timer `step_atom`: step `step` ends (0: the plan tick).
  void on_step_timer(uint64_t step, scheduler_orders& out);
  /// The GPU computed step `step`, its layers waiting `stall_ns` in all for the swap-in.
  void on_compute_done(uint64_t step, int64_t stall_ns, scheduler_orders& out);
  /// Timer `handoff_atom` for request `id` (PD).
  void on_handoff_timer(request_id id, scheduler_orders& out);
  void on_transfer_done(transfer_use use, request_id id, const transfer_done& d,
                        scheduler_orders& out);
  void on_exists(exists_use use, request_id id, const exists_reply& r, scheduler_orders& out);

  // -- observers ----------------------------------------------------------------------------------

  /// The report so far; `drained` once every request here has finished and nothing is pending.
  scheduler_report report() const;
  step_phase phase() const { return st_.steps.phase(); }
  const request_book& book() const { return st_.book; }

 private:
  void maybe_step(scheduler_orders& out);
  void continue_plan(const probe_reply* reply, scheduler_orders& out);
  void send_commit(scheduler_orders& out);
  void start_refetches(const probe_reply& reply, scheduler_orders& out);
  void note_restored(const grant& g);
  void compute(const grant& g, scheduler_orders& out);
  void compute_on_gpu(const grant& g, const step_cost& cost, scheduler_orders& out);
  void end_step(uint64_t step, scheduler_orders& out);
  void note_lag(int64_t ns);

  scheduler_state st_;
  step_compute compute_;
  prefill_side prefill_;
  decode_side decode_;
  // the step in flight
  uint64_t step_ = 0;
  step_plan plan_;
  std::vector<work_item> items_;
  int64_t step_start_ = 0;
  bool step_after_swap_in_ = false;  // the step's layers wait for a swap-in (GPU compute)
  step_record gpu_step_;             // the step on the GPU, logged when it is done
  int64_t plan_start_ = 0;  // when planning the step began
  int64_t step_due_ = -1;   // when the modelled step ends (-1: not granted yet, or GPU)
};

}  // namespace kvtier
