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
    return;
  }
  store_plan& p = stores_[x.trace.seq];
  p.keys = handoff_keys(a.blocks, st.options.options.block_size, x.prompt, pd_.storage_namespace,
                        a.req);
  if (pd_.writes == handoff_writes::unshared_blocks) {
    // The leading full listed blocks go under their shared keys, as the write policy stores them.
    while (p.shared < p.keys.size() && p.shared < a.blocks.size()
           && a.blocks[p.shared].tokens == st.options.options.block_size)
      ++p.shared;
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
  store_plan& p = stores_.at(id);
  if (p.shared == 0) {
    write(id, 0, st, out);
    return;
  }
  // Blocks this pass computed are being stored by the write policy now; its hits were stored
  // before, unless storage has evicted them since: ask which are there.
  const live_request& x = st.book.at(id);
  uint32_t hits = 0;
  for (tier t : {tier::device, tier::host, tier::storage})
    hits += at(x.record.hit_blocks, t);
  p.computed_from = std::min(hits, p.shared);
  if (p.computed_from == 0) {
    write(id, 0, st, out);
    return;
  }
  std::vector<uint64_t> hit_keys(p.keys.begin(), p.keys.begin() + p.computed_from);
  out.push_back(storage_order{exists_query{std::move(hit_keys)}, exists_use::handoff_stored, id});
}

void prefill_side::already_stored(request_id id, uint32_t leading, scheduler_state& st,
                                  scheduler_orders& out) {
  write(id, leading, st, out);
}

void prefill_side::write(request_id id, uint32_t stored_hits, scheduler_state& st,
                         scheduler_orders& out) {
  store_plan& p = stores_.at(id);
  // P writes what nobody else stores: its hits storage lacks, and the blocks past the shared
  // ones (the partial last block, blocks no trace id names); the rest the policy stores.
  std::vector<uint64_t> keys(p.keys.begin() + stored_hits, p.keys.begin() + p.computed_from);
  keys.insert(keys.end(), p.keys.begin() + p.shared, p.keys.end());
  if (keys.empty()) {
    check_visible(id, out);
    return;
  }
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
  out.push_back(storage_order{exists_query{stores_.at(id).keys}, exists_use::handoff_visible, id});
}

void prefill_side::visible(request_id id, uint32_t leading, scheduler_state& st,
                           scheduler_orders& out) {
  store_plan& p = stores_.at(id);
  if (leading >= p.keys.size()) {
    complete(id, true, st, out);
    return;
  }
  if (++p.polls > visibility_polls) {
    if (leading < p.shared) {
      // A block left to the write policy never became visible (its backup found no host room):
      // P writes the ones still missing itself, once.
      std::vector<uint64_t> missing(p.keys.begin() + leading, p.keys.begin() + p.shared);
      p.shared = 0;
      p.polls = 0;
      st.report.handoff_blocks_sent += missing.size();
      st.write_to_storage(missing, transfer_use::handoff_store, id, out);
      return;
    }
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
  if (streams_)
    streams_->erase(id);
  stores_.erase(id);
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
