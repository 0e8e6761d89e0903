#include "model/scheduler/decode_side.hpp"

#include <algorithm>

#include "model/pd/handoff_keys.hpp"
#include "model/pd/preallocation.hpp"
#include "core/check.hpp"
#include "core/time_math.hpp"

namespace kvtier {

namespace {

// A dropped victim's save is a two-phase put per block: the request goes back to the router once
// every block it writes is visible, so that its next prefill can match them (FastDeploy writes
// before it drops, holding its scheduler meanwhile; here only the victim waits). Storage is asked
// at once, then after 1 us, and again after each wait doubled up to 1 ms, for at most 5 s in all:
// a failed put never becomes visible, and the next prefill computes what it missed.
constexpr int64_t drop_poll_first_ns = 1000;
constexpr int64_t drop_poll_limit_ns = 5'000'000'000;

preallocate_reply reply(request_id id, preallocation_verdict v, uint32_t hits = 0) {
  return preallocate_reply{id, v, hits};
}

}  // namespace

// -- preallocation --------------------------------------------------------------------------------

std::optional<preallocate_reply> decode_side::on_preallocate(const preallocate_request& p,
                                                             scheduler_state& st,
                                                             preallocation& ask) {
  const trace_request& tr = p.arrival.req;
  request_id id = tr.seq;
  request_layout layout(p.arrival.blocks, st.options.options.block_size);
  uint32_t prompt = tr.input_tokens > 0 ? tr.input_tokens : 1;
  uint32_t output = tr.output_tokens > 0 ? tr.output_tokens : 1;
  if (layout.blocks_for(prompt + uint64_t{output} - 1) > st.options.device_blocks)
    return reply(id, preallocation_verdict::never_fits);
  decode_load load;
  load.waiting = st.book.waiting.size() + st.awaiting_ready;
  load.holding = st.book.running.size() + holding();
  load.max_num_seqs = st.options.options.max_num_seqs;
  load.available_blocks = st.known_available > asked_blocks_ ? st.known_available - asked_blocks_
                                                             : 0;
  load.reserve_per_running = st.reserve.blocks();
  // FastDeploy's prompt blocks plus enc_dec_block_num, unless that much could never be held.
  const uint32_t wanted = st.options.pd.decode_extra_blocks;
  uint32_t extra = layout.blocks_for(prompt) + wanted <= st.options.device_blocks ? wanted : 0;
  uint64_t need = layout.blocks_for(prompt) + uint64_t{extra};
  preallocation_verdict v = decide_preallocation(load, need);
  if (v != preallocation_verdict::granted) {
    ++st.report.preallocation_refusals;
    return reply(id, v);
  }
  // Tokens past the prompt fill whole blocks: `extra` blocks' worth holds `extra` blocks more.
  ask = preallocation{id, p.arrival.blocks, prompt + extra * st.options.options.block_size};
  asking_.emplace(id, need);  // the slot and blocks are taken until the controller answers
  asked_blocks_ += need;
  return std::nullopt;
}

preallocate_reply decode_side::on_preallocated(const preallocation_result& res,
                                               const request_arrival& a, scheduler_state& st) {
  request_id id = a.req.seq;
  uint32_t block_size = st.options.options.block_size;
  auto asked = asking_.find(id);
  KVTIER_ASSERT(asked != asking_.end());
  auto held_blocks = static_cast<uint32_t>(asked->second);  // the prompt's and the extra ones
  asked_blocks_ -= asked->second;
  asking_.erase(asked);
  st.known_available = res.available_blocks;
  if (!res.ok) {
    ++st.report.preallocation_refusals;
    return reply(id, preallocation_verdict::no_blocks);
  }
  ++st.report.preallocations;
  live_request& x = st.book.add(a.req, a.blocks, block_size, a.handoff.reroutes);
  x.decode_blocks = a.blocks;
  x.covered_blocks = held_blocks;
  x.record.admitted_ns = st.now();
  at(x.record.hit_blocks, tier::device) = at(x.record.first_hit_blocks, tier::device) =
    res.device_hit_blocks;
  at(x.record.hit_tokens, tier::device) = at(x.record.first_hit_tokens, tier::device) =
    res.device_hit_tokens;
  kv_wait w;
  w.hit_blocks = res.device_hit_blocks;
  w.hit_tokens = res.device_hit_tokens;
  if (st.options.pd.transfer == pd_transfer::storage) {
    std::vector<uint64_t> keys =
      handoff_keys(a.blocks, block_size, x.prompt, st.options.pd.storage_namespace, a.req);
    w.read_keys.assign(keys.begin() + std::min<size_t>(res.device_hit_blocks, keys.size()),
                       keys.end());
  }
  awaiting_kv_.emplace(id, std::move(w));
  st.expect_output(x, a);
  return reply(id, preallocation_verdict::granted, res.device_hit_blocks);
}

// -- the handoff ----------------------------------------------------------------------------------

bool decode_side::on_kv_handoff(const kv_handoff& k, scheduler_state& st, scheduler_orders& out) {
  request_id id = k.req;
  if (!awaiting_kv_.contains(id))
    return false;
  st.unanswered.insert(id);
  live_request& r = st.book.at(id);
  r.record.first_token_ns = k.first_token_ns;
  handoff_outcome outcome = k.outcome;
  if (outcome == handoff_outcome::cancelled) {
    awaiting_kv_.erase(id);
    st.output_keys.erase(id);
    r.finished = true;
    st.finished.push_back(id);
    request_done d = st.done_now(id);
    d.rejected = true;
    st.answer(id, d, out);
    st.request_plan(out);
  } else if (outcome == handoff_outcome::failed || k.inject_failure) {
    if (st.options.pd.transfer == pd_transfer::storage && k.inject_failure)
      ++st.report.handoff_read_failures;
    handoff_failed(id, st, out);
  } else if (st.options.pd.transfer == pd_transfer::direct) {
    kv_arrived(id, st, out);
  } else {
    read_handoff(id, st, out);
  }
  return true;
}

// Storage -> host -> its preallocated device blocks, layer by layer.
void decode_side::read_handoff(request_id id, scheduler_state& st, scheduler_orders& out) {
  kv_wait& w = awaiting_kv_.at(id);
  if (w.read_keys.empty()) {
    kv_arrived(id, st, out);
    return;
  }
  ++st.report.handoff_reads;
  transfer load = st.new_transfer(transfer_kind::load, w.read_keys);
  w.swap_in = st.new_transfer(transfer_kind::swap_in, w.read_keys);
  out.push_back(engine_order{std::move(load), transfer_use::handoff_load, id});
}

void decode_side::loaded(request_id id, bool ok, scheduler_state& st, scheduler_orders& out) {
  if (!ok) {
    ++st.report.handoff_read_failures;
    handoff_failed(id, st, out);
    return;
  }
  out.push_back(engine_order{std::move(awaiting_kv_.at(id).swap_in),
                             transfer_use::handoff_swap_in, id});
}

void decode_side::swapped_in(request_id id, scheduler_state& st, scheduler_orders& out) {
  kv_arrived(id, st, out);
}

void decode_side::kv_arrived(request_id id, scheduler_state& st, scheduler_orders& out) {
  awaiting_kv_.erase(id);
  start_decoding(id, st.book.at(id).prompt, st, out);
}

void decode_side::handoff_failed(request_id id, scheduler_state& st, scheduler_orders& out) {
  auto w = awaiting_kv_.extract(id);
  live_request& r = st.book.at(id);
  if (st.options.pd.on_failure == handoff_failure_rule::recompute) {
    r.recomputed = true;
    start_decoding(id, w.mapped().hit_tokens, st, out);
    return;
  }
  r.finished = true;
  r.record.failed = true;
  st.output_keys.erase(id);  // nothing worth keeping was computed
  st.finished.push_back(id);
  request_done d = st.done_now(id);
  d.failed = true;
  st.answer(id, d, out);
  st.request_plan(out);
}

// Its KV is in place (or, recomputing, its device hits are): it decodes from the next step.
void decode_side::start_decoding(request_id id, uint64_t computed, scheduler_state& st,
                                 scheduler_orders& out) {
  live_request& r = st.book.at(id);
  r.decode_ready_ns = st.now();
  r.computed = computed;
  r.high_water = computed;
  r.generated = 1;
  if (r.layout.complete_within(computed) > 0)
    st.computed.push_back({id, static_cast<uint32_t>(computed)});
  if (r.output <= 1 && computed == r.prompt) {  // the first token was the only one
    r.finished = true;
    r.record.finish_ns = r.decode_ready_ns;
    st.finish(id, out);
  } else {
    decode_ready_.push_back(id);
  }
  st.request_plan(out);
}

void decode_side::start_ready(request_book& book) {
  for (request_id id : decode_ready_) {
    book.at(id).running = true;
    book.running.push_back(id);
  }
  decode_ready_.clear();
}

// -- preemption drops the request (docs/fastdeploy.md §4) ----------------------------------------

// FastDeploy's decode role drops a victim instead of queueing it again; the router sends it
// through prefill once more. swap_to_host keeps it here: its host copies are this instance's, and
// a dropped request would never swap them back (docs/preemption.md).
bool decode_side::drops_victims(const scheduler_core_options& o) {
  return o.role == pd_role::decode && o.options.preemption != preemption_mode::swap_to_host;
}

// The controller has saved (by scheduler.preemption) and released the victims' blocks and
// forgotten them: each leaves with what its next pass needs.
void decode_side::drop_victims(const std::vector<request_id>& victims, const grant& g,
                               scheduler_state& st, scheduler_orders& out) {
  uint32_t block_size = st.options.options.block_size;
  size_t key_at = 0;
  for (size_t i = 0; i < victims.size(); ++i) {
    request_id id = victims[i];
    uint32_t keys = i < g.dropped_key_counts.size() ? g.dropped_key_counts[i] : 0;
    KVTIER_ASSERT(key_at + keys <= g.dropped_keys.size());
    live_request& r = st.book.at(id);
    st.book.waiting.erase(std::find(st.book.waiting.begin(), st.book.waiting.end(), id));
    r.finished = true;
    request_done d = st.done_now(id);  // with how its handoff went
    d.dropped = true;
    d.dropped_ns = d.at_ns;
    // Its next prefill covers the prompt and every token generated so far, and samples the next
    // one (FastDeploy: need_prefill_tokens = num_total_tokens). One whose tokens are all there
    // (a failed handoff it was recomputing on D) samples its last token again instead.
    KVTIER_ASSERT(r.generated >= 1 && r.generated <= r.output);
    uint32_t kept = r.generated < r.output ? r.generated : r.generated - 1;
    d.resume_prompt = r.prompt + kept;
    d.resume_output = r.output - kept;
    d.resume_blocks = std::move(r.decode_blocks);
    // The generated blocks the save named (apply_grant listed them as the controller did).
    auto listed = static_cast<uint32_t>(d.resume_blocks.size());
    if (r.layout.listed() > listed)
      name_private_blocks(id, r.layout.listed() - listed, block_size, d.resume_blocks);
    st.output_keys.erase(id);
    ++st.report.decode_drops;
    if (keys == 0) {
      st.answer(id, std::move(d), out);
      continue;
    }
    d.drop_saved = true;
    ++st.report.decode_drop_writes;
    st.report.decode_drop_write_blocks += keys;
    drop_write w;
    w.keys.assign(g.dropped_keys.begin() + static_cast<long>(key_at),
                  g.dropped_keys.begin() + static_cast<long>(key_at + keys));
    key_at += keys;
    w.done = std::move(d);
    dropping_.emplace(id, std::move(w));
    check_drop_written(id, out);
  }
}

void decode_side::check_drop_written(request_id id, scheduler_orders& out) const {
  out.push_back(storage_order{exists_query{dropping_.at(id).keys}, exists_use::drop_saved, id});
}

void decode_side::drop_visible(request_id id, uint32_t leading, scheduler_state& st,
                               scheduler_orders& out) {
  drop_write& w = dropping_.at(id);
  int64_t now = st.now();
  if (leading >= w.keys.size()) {
    finish_drop(id, false, st, out);
    return;
  }
  if (now - w.done.dropped_ns >= drop_poll_limit_ns) {
    finish_drop(id, true, st, out);
    return;
  }
  int64_t wait = std::min(visibility_poll_ns, drop_poll_first_ns << std::min(w.polls, 20u));
  ++w.polls;
  out.push_back(timer_order{timer_kind::handoff, time_add(now, wait), id});
}

void decode_side::finish_drop(request_id id, bool timed_out, scheduler_state& st,
                              scheduler_orders& out) {
  auto w = dropping_.extract(id);
  request_done d = std::move(w.mapped().done);
  d.at_ns = st.now();
  st.report.decode_drop_write_timeouts += timed_out;
  st.report.decode_drop_write_wait_ns = time_add(st.report.decode_drop_write_wait_ns,
                                                 d.at_ns - d.dropped_ns);
  st.answer(id, std::move(d), out);
}

}  // namespace kvtier
