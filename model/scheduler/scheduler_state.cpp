#include "model/scheduler/scheduler_state.hpp"

#include "core/check.hpp"

namespace kvtier {

scheduler_state::scheduler_state(const scheduler_core_options& o, now_source clock)
  : options(o), now(std::move(clock)), reserve(o.options), known_available(o.device_blocks) {}

request_done scheduler_state::done_now(request_id id) const {
  const live_request& r = book.at(id);
  request_done d{id, now(), false};
  d.decode_ready_ns = r.decode_ready_ns;
  d.recomputed = r.recomputed;
  return d;
}

void scheduler_state::answer(request_id id, request_done d, scheduler_orders& out) {
  KVTIER_ASSERT(unanswered.erase(id) == 1);
  std::vector<cache_block>().swap(book.at(id).decode_blocks);
  out.push_back(answer_order{std::move(d)});
}

void scheduler_state::request_plan(scheduler_orders& out) {
  if (steps.phase() != step_phase::idle)
    return;  // a tick is set already, or the step in flight plans the next one when it ends
  steps.move_to(step_phase::plan_set);
  out.push_back(timer_order{timer_kind::plan, now(), 0});
}

transfer scheduler_state::new_transfer(transfer_kind kind, const std::vector<uint64_t>& keys) {
  transfer t;
  t.id = next_transfer++;
  t.kind = kind;
  for (uint64_t k : keys)
    t.blocks.push_back({0, 0, 0, k});
  return t;
}

void scheduler_state::write_to_storage(const std::vector<uint64_t>& keys, transfer_use use,
                                       request_id req, scheduler_orders& out) {
  transfer d2h = new_transfer(transfer_kind::backup, keys);
  transfer store = new_transfer(transfer_kind::store, keys);
  store.after.push_back(d2h.id);
  out.push_back(engine_order{std::move(d2h), transfer_use::background, req});
  out.push_back(engine_order{std::move(store), use, req});
}

}  // namespace kvtier
