#include "model/scheduler/prefill_side.hpp"

#include <algorithm>

#include "model/pd/handoff_keys.hpp"
#include "core/check.hpp"

namespace kvtier {

namespace {

// P emits the first token of a storage handoff only once every block is visible, asking every
// millisecond, for at most 5 s (a put that failed never makes its block visible: D's read then
// fails, by pd.on_handoff_failure).
constexpr uint32_t visibility_polls = 5000;

}  // namespace

prefill_side::prefill_side(const scheduler_core_options& o) : pd_(o.pd) {
  if (o.role == pd_role::prefill && o.pd.transfer == pd_transfer::direct)
    streams_ = std::make_unique<prefill_streams>(o.pd, o.options.block_size, o.compute.layers,
                                                 o.block_bytes);
}

void prefill_side::expect(const live_request& x, const request_arrival& a,
                          const scheduler_state& st) {
  if (pd_.transfer == pd_transfer::direct) {
    prefill_stream s;
    s.layout = x.layout;
    s.prompt = x.prompt;
    s.blocks = x.layout.blocks_for(x.prompt);
    s.skip = std::min(a.handoff.decode_has_blocks, s.blocks);
    streams_->add(x.trace.seq, std::move(s));
  } else {
    store_keys_[x.trace.seq] = handoff_keys(a.blocks, st.options.options.block_size, x.prompt,
                                            pd_.storage_namespace);
  }
}

void prefill_side::begin(request_id id, int64_t now, scheduler_state& st,
                         scheduler_orders& out) {
  handing_off_[id] = now;
  if (streams_) {
    int64_t arrives = std::max(now, streams_->find(id)->kv_arrival_ns);
    out.push_back(timer_order{timer_kind::handoff, arrives, id});
    return;
  }
  const std::vector<uint64_t>& keys = store_keys_.at(id);
  st.report.handoff_blocks_sent += keys.size();
  st.write_to_storage(keys, transfer_use::handoff_store, id, out);
}

void prefill_side::stored(request_id id, bool ok, scheduler_state& st, scheduler_orders& out) {
  if (ok)
    check_visible(id, out);
  else
    complete(id, false, st, out);
}

void prefill_side::check_visible(request_id id, scheduler_orders& out) const {
  out.push_back(storage_order{exists_query{store_keys_.at(id)}, exists_use::handoff_visible, id});
}

void prefill_side::visible(request_id id, uint32_t leading, scheduler_state& st,
                           scheduler_orders& out) {
  if (leading >= store_keys_.at(id).size()) {
    complete(id, true, st, out);
    return;
  }
  if (++visibility_checks_[id] > visibility_polls) {
    complete(id, true, st, out);  // D finds a block missing
    return;
  }
  out.push_back(timer_order{timer_kind::handoff, st.now() + visibility_poll_ns, id});
}

void prefill_side::on_timer(request_id id, scheduler_state& st, scheduler_orders& out) {
  if (streams_)
    complete(id, true, st, out);  // the last layer has arrived
  else
    check_visible(id, out);       // ask storage again
}

void prefill_side::complete(request_id id, bool ok, scheduler_state& st, scheduler_orders& out) {
  auto it = handing_off_.find(id);
  KVTIER_ASSERT(it != handing_off_.end());
  live_request& r = st.book.at(id);
  request_done d{id, st.now(), false};
  d.prefill_end_ns = it->second;
  if (pd_.transfer == pd_transfer::storage)
    r.record.first_token_ns = d.at_ns;  // emitted once every block is written
  d.first_token_ns = r.record.first_token_ns;
  d.handoff_ok = ok;
  handing_off_.erase(it);
  visibility_checks_.erase(id);
  if (streams_)
    streams_->erase(id);
  store_keys_.erase(id);
  st.finished.push_back(id);  // sent: the blocks may go
  st.answer(id, d, out);
  st.request_plan(out);
}

std::vector<int64_t>* prefill_side::layer_end_sink() {
  if (!streams_ || streams_->empty())
    return nullptr;
  layer_ends_.clear();
  return &layer_ends_;
}

void prefill_side::step_computed(const std::vector<work_item>& items) {
  for (const work_item& w : items)
    streams_->computed(w.req, w.start + w.tokens, layer_ends_);
}

void prefill_side::fill(scheduler_report& r) const {
  if (!streams_)
    return;
  r.pd_link_bytes = streams_->link().bytes();
  r.pd_link_busy_ns = streams_->link().busy_ns();
  r.pd_link_messages = streams_->link().messages();
  r.handoff_blocks_sent += streams_->blocks_sent();
  r.handoff_blocks_skipped = streams_->blocks_skipped();
}

}  // namespace kvtier
