#include "actors/scheduler/scheduler.hpp"

#include <algorithm>
#include <memory>

#include <absl/container/flat_hash_map.h>

#include "model/pd/handoff_keys.hpp"
#include "model/pd/preallocation.hpp"
#include "model/pd/prefill_streams.hpp"
#include "model/scheduler/layer_pipeline.hpp"
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
  // -- PD (the handoff handlers below) --
  std::unique_ptr<prefill_streams> streams;  // prefill, direct: what goes over the PD link
  absl::flat_hash_map<request_id, std::vector<uint64_t>> store_keys;  // prefill, storage
  absl::flat_hash_map<request_id, int64_t> handing_off;  // prefill: prefill end of each handoff
  absl::flat_hash_map<request_id, uint32_t> visibility_checks;  // prefill, storage
  struct decode_wait {
    uint32_t hit_blocks = 0;
    uint64_t hit_tokens = 0;
    std::vector<uint64_t> read_keys;  // storage: the blocks it lacks
  };
  absl::flat_hash_map<request_id, decode_wait> awaiting_kv;  // decode: preallocated
  // cache.output_caching: storage keys of each request's prompt and output blocks, and the
  // finished requests whose blocks are being written (held until then)
  absl::flat_hash_map<request_id, std::vector<uint64_t>> output_keys;
  uint64_t writing_outputs = 0;
  std::vector<request_id> decode_ready;  // decode: KV in place, joins running at the next plan
  // decode: each preallocated request's blocks, which a dropped victim goes back to the router with
  absl::flat_hash_map<request_id, std::vector<cache_block>> decode_blocks;
  struct drop_write {
    std::vector<uint64_t> keys;  // what its save writes, in block order
    uint32_t polls = 0;
    request_done done;           // the answer, once they are all visible
  };
  absl::flat_hash_map<request_id, drop_write> dropping;  // decode: victims whose save is writing
  uint64_t next_transfer = uint64_t{1} << 62;  // apart from the controller's transfer ids
  std::vector<int64_t> layer_ends;             // scratch
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

// -- answers ---------------------------------------------------------------------------------------

request_done done_now(self_ptr self, request_id id) {
  auto& st = self->state;
  const live_request& r = st.book.at(id);
  request_done d{id, now_of(self), false};
  d.decode_ready_ns = r.decode_ready_ns;
  d.recomputed = r.recomputed;
  return d;
}

void answer(self_ptr self, request_id id, request_done d) {
  auto& st = self->state;
  auto it = st.answers.find(id);
  KVTIER_ASSERT(it != st.answers.end());
  it->second.deliver(std::move(d));
  st.answers.erase(it);
  st.decode_blocks.erase(id);
}

// -- PD, prefill side ------------------------------------------------------------------------------

void expect_handoff(self_ptr self, const live_request& x, const request_arrival& a) {
  auto& st = self->state;
  uint32_t block_size = st.config.options.block_size;
  if (st.config.pd.transfer == pd_transfer::direct) {
    prefill_stream s;
    s.layout = x.layout;
    s.prompt = x.prompt;
    s.blocks = x.layout.blocks_for(x.prompt);
    s.skip = std::min(a.handoff.decode_has_blocks, s.blocks);
    st.streams->add(x.trace.seq, std::move(s));
  } else {
    st.store_keys[x.trace.seq] =
      handoff_keys(a.blocks, block_size, x.prompt, st.config.pd.storage_namespace);
  }
}

transfer handoff_transfer(self_ptr self, transfer_kind kind, const std::vector<uint64_t>& keys) {
  transfer t;
  t.id = self->state.next_transfer++;
  t.kind = kind;
  for (uint64_t k : keys)
    t.blocks.push_back({0, 0, 0, k});
  return t;
}

void complete_handoff(self_ptr self, request_id id, bool ok) {
  auto& st = self->state;
  auto it = st.handing_off.find(id);
  KVTIER_ASSERT(it != st.handing_off.end());
  live_request& r = st.book.at(id);
  request_done d{id, now_of(self), false};
  d.prefill_end_ns = it->second;
  if (st.config.pd.transfer == pd_transfer::storage)
    r.record.first_token_ns = d.at_ns;  // emitted once every block is written
  d.first_token_ns = r.record.first_token_ns;
  d.handoff_ok = ok;
  st.handing_off.erase(it);
  st.visibility_checks.erase(id);
  if (st.streams)
    st.streams->erase(id);
  st.store_keys.erase(id);
  st.finished.push_back(id);  // sent: the blocks may go
  answer(self, id, d);
  request_plan(self);
}

// Storage puts are two-phase: a block another put is still writing is not written twice, and is
// invisible until that put completes. P emits the first token only once every block is visible,
// asking every millisecond, for at most 5 s (a put that failed never makes its block visible:
// D's read then fails, by pd.on_handoff_failure).
constexpr int64_t visibility_poll_ns = 1'000'000;
constexpr uint32_t visibility_polls = 5000;

void check_visible(self_ptr self, request_id id) {
  auto& st = self->state;
  self->request(st.config.storage, caf::infinite, exists_query{st.store_keys.at(id)})
    .then(
      [=](const exists_reply& r) {
        auto& s = self->state;
        if (r.leading >= s.store_keys.at(id).size()) {
          complete_handoff(self, id, true);
          return;
        }
        if (++s.visibility_checks[id] > visibility_polls) {
          complete_handoff(self, id, true);  // D finds a block missing
          return;
        }
        self->delayed_send(self, s.config.clock.until(self->clock(),
                                                      now_of(self) + visibility_poll_ns),
                           handoff_atom_v, id);
      },
      [=](const caf::error& e) { fail(self, e); });
}

// The first token is sampled: the KV goes to D, over the PD link (already under way, layer by
// layer) or through storage (every block written, then the first token).
void begin_handoff(self_ptr self, request_id id, int64_t now) {
  auto& st = self->state;
  st.handing_off[id] = now;
  if (st.streams) {
    int64_t arrives = std::max(now, st.streams->find(id)->kv_arrival_ns);
    self->delayed_send(self, st.config.clock.until(self->clock(), arrives), handoff_atom_v, id);
    return;
  }
  const std::vector<uint64_t>& keys = st.store_keys.at(id);
  st.report.handoff_blocks_sent += keys.size();
  transfer d2h = handoff_transfer(self, transfer_kind::backup, keys);
  transfer store = handoff_transfer(self, transfer_kind::store, keys);
  store.after.push_back(d2h.id);
  self->request(st.config.engine, caf::infinite, std::move(d2h))
    .then([](const transfer_done&) {}, [=](const caf::error& e) { fail(self, e); });
  self->request(st.config.engine, caf::infinite, std::move(store))
    .then(
      [=](const transfer_done& d) {
        if (d.ok)
          check_visible(self, id);
        else
          complete_handoff(self, id, false);
      },
      [=](const caf::error& e) { fail(self, e); });
}

// -- cache.output_caching --------------------------------------------------------------------------

void expect_output(self_ptr self, const live_request& x, const std::vector<cache_block>& blocks) {
  auto& st = self->state;
  if (!st.config.output_caching)
    return;
  // Its KV at the end covers the prompt and every generated token but the last.
  st.output_keys[x.trace.seq] = handoff_keys(blocks, st.config.options.block_size,
                                             x.prompt + uint64_t{x.output} - 1,
                                             st.config.pd.storage_namespace);
}

// A finished request's blocks go once they are written (device -> host -> storage), so P
// instances find them in the pool later. Returns false when it writes nothing.
bool write_output(self_ptr self, request_id id) {
  auto& st = self->state;
  auto it = st.output_keys.find(id);
  if (it == st.output_keys.end())
    return false;
  std::vector<uint64_t> keys = std::move(it->second);
  st.output_keys.erase(it);
  ++st.report.output_cache_writes;
  st.report.output_cache_blocks += keys.size();
  ++st.writing_outputs;
  transfer d2h = handoff_transfer(self, transfer_kind::backup, keys);
  transfer store = handoff_transfer(self, transfer_kind::store, keys);
  store.after.push_back(d2h.id);
  self->request(st.config.engine, caf::infinite, std::move(d2h))
    .then([](const transfer_done&) {}, [=](const caf::error& e) { fail(self, e); });
  self->request(st.config.engine, caf::infinite, std::move(store))
    .then(
      [=](const transfer_done&) {
        auto& s = self->state;
        --s.writing_outputs;
        s.finished.push_back(id);
        request_plan(self);
      },
      [=](const caf::error& e) { fail(self, e); });
  return true;
}

// -- PD, decode side -------------------------------------------------------------------------------

caf::result<preallocate_reply> on_preallocate(self_ptr self, preallocate_request& p) {
  auto& st = self->state;
  const trace_request& tr = p.arrival.req;
  request_id id = tr.seq;
  uint32_t block_size = st.config.options.block_size;
  request_layout layout(p.arrival.blocks, block_size);
  uint32_t prompt = tr.input_tokens > 0 ? tr.input_tokens : 1;
  uint32_t output = tr.output_tokens > 0 ? tr.output_tokens : 1;
  if (layout.blocks_for(prompt + uint64_t{output} - 1) > st.config.device_blocks)
    return preallocate_reply{id, preallocation_verdict::never_fits, 0};
  decode_load load;
  load.waiting = st.book.waiting.size() + st.awaiting_ready;
  load.holding = st.book.running.size() + st.awaiting_kv.size() + st.decode_ready.size();
  load.max_num_seqs = st.config.options.max_num_seqs;
  load.available_blocks = st.known_available;
  load.reserve_per_running = st.reserve->blocks();
  preallocation_verdict v = decide_preallocation(load, layout.blocks_for(prompt));
  if (v != preallocation_verdict::granted) {
    ++st.report.preallocation_refusals;
    return preallocate_reply{id, v, 0};
  }
  auto promise = self->make_response_promise<preallocate_reply>();
  preallocation ask{id, p.arrival.blocks, prompt};
  self->request(st.controller, caf::infinite, std::move(ask))
    .then(
      [=, a = std::move(p.arrival)](const preallocation_result& res) mutable {
        auto& s = self->state;
        s.known_available = res.available_blocks;
        if (!res.ok) {
          ++s.report.preallocation_refusals;
          promise.deliver(preallocate_reply{id, preallocation_verdict::no_blocks, 0});
          return;
        }
        ++s.report.preallocations;
        live_request& x = s.book.add(a.req, a.blocks, block_size, a.handoff.reroutes);
        s.decode_blocks[id] = a.blocks;
        x.covered_blocks = x.layout.blocks_for(x.prompt);
        x.record.admitted_ns = now_of(self);
        x.record.hit_blocks[0] = x.record.first_hit_blocks[0] = res.device_hit_blocks;
        x.record.hit_tokens[0] = x.record.first_hit_tokens[0] = res.device_hit_tokens;
        scheduler_state::decode_wait w;
        w.hit_blocks = res.device_hit_blocks;
        w.hit_tokens = res.device_hit_tokens;
        if (s.config.pd.transfer == pd_transfer::storage) {
          std::vector<uint64_t> keys =
            handoff_keys(a.blocks, block_size, x.prompt, s.config.pd.storage_namespace);
          w.read_keys.assign(keys.begin() + std::min<size_t>(res.device_hit_blocks, keys.size()),
                             keys.end());
        }
        s.awaiting_kv.emplace(id, std::move(w));
        expect_output(self, x, a.blocks);
        promise.deliver(preallocate_reply{id, preallocation_verdict::granted,
                                          res.device_hit_blocks});
      },
      [=](const caf::error& e) mutable {
        promise.deliver(e);
        fail(self, e);
      });
  return promise;
}

// Its KV is in place (or, recomputing, its device hits are): it decodes from the next step.
void start_decoding(self_ptr self, request_id id, uint64_t computed) {
  auto& st = self->state;
  live_request& r = st.book.at(id);
  r.decode_ready_ns = now_of(self);
  r.computed = computed;
  r.high_water = computed;
  r.generated = 1;
  if (r.layout.complete_within(computed) > 0)
    st.computed.push_back({id, static_cast<uint32_t>(computed)});
  if (r.output <= 1 && computed == r.prompt) {  // the first token was the only one
    r.finished = true;
    r.record.finish_ns = r.decode_ready_ns;
    if (!write_output(self, id))
      st.finished.push_back(id);
    answer(self, id, done_now(self, id));
  } else {
    st.decode_ready.push_back(id);
  }
  request_plan(self);
}

void handoff_failed(self_ptr self, request_id id) {
  auto& st = self->state;
  auto w = st.awaiting_kv.extract(id);
  live_request& r = st.book.at(id);
  if (st.config.pd.on_failure == handoff_failure_rule::recompute) {
    r.recomputed = true;
    start_decoding(self, id, w.mapped().hit_tokens);
    return;
  }
  r.finished = true;
  r.record.failed = true;
  st.output_keys.erase(id);  // nothing worth keeping was computed
  st.finished.push_back(id);
  request_done d = done_now(self, id);
  d.failed = true;
  answer(self, id, d);
  request_plan(self);
}

void kv_arrived(self_ptr self, request_id id) {
  auto& st = self->state;
  st.awaiting_kv.erase(id);
  start_decoding(self, id, st.book.at(id).prompt);
}

// Storage -> host -> its preallocated device blocks, layer by layer.
void read_handoff(self_ptr self, request_id id) {
  auto& st = self->state;
  const std::vector<uint64_t>& keys = st.awaiting_kv.at(id).read_keys;
  if (keys.empty()) {
    kv_arrived(self, id);
    return;
  }
  ++st.report.handoff_reads;
  transfer load = handoff_transfer(self, transfer_kind::load, keys);
  transfer swap_in = handoff_transfer(self, transfer_kind::swap_in, keys);
  self->request(st.config.engine, caf::infinite, std::move(load))
    .then(
      [=, swap_in = std::move(swap_in)](const transfer_done& d) mutable {
        if (!d.ok) {
          ++self->state.report.handoff_read_failures;
          handoff_failed(self, id);
          return;
        }
        self->request(self->state.config.engine, caf::infinite, std::move(swap_in))
          .then([=](const transfer_done&) { kv_arrived(self, id); },
                [=](const caf::error& e) { fail(self, e); });
      },
      [=](const caf::error& e) { fail(self, e); });
}

caf::result<request_done> on_kv_handoff(self_ptr self, kv_handoff& k) {
  auto& st = self->state;
  request_id id = k.req;
  if (!st.awaiting_kv.contains(id))
    return caf::make_error(caf::sec::runtime_error,
                           "kv_handoff: request " + std::to_string(id) + " is not preallocated here");
  auto promise = self->make_response_promise<request_done>();
  st.answers.emplace(id, promise);
  live_request& r = st.book.at(id);
  r.record.first_token_ns = k.first_token_ns;
  handoff_outcome outcome = k.outcome;
  if (outcome == handoff_outcome::cancelled) {
    st.awaiting_kv.erase(id);
    st.output_keys.erase(id);
    r.finished = true;
    st.finished.push_back(id);
    request_done d = done_now(self, id);
    d.rejected = true;
    answer(self, id, d);
    request_plan(self);
  } else if (outcome == handoff_outcome::failed || k.inject_failure) {
    if (st.config.pd.transfer == pd_transfer::storage && k.inject_failure)
      ++st.report.handoff_read_failures;
    handoff_failed(self, id);
  } else if (st.config.pd.transfer == pd_transfer::direct) {
    kv_arrived(self, id);
  } else {
    read_handoff(self, id);
  }
  return promise;
}

// -- arrivals and steps ----------------------------------------------------------------------------

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
  if (a.handoff.reroutes > 0) {
    // Its last pass here may not have been committed yet: the controller lets that pass's blocks
    // go at this arrival instead (a later commit must not forget the new pass).
    st.finished.erase(std::remove(st.finished.begin(), st.finished.end(), id), st.finished.end());
  }
  live_request& x = st.book.add(a.req, a.blocks, st.config.options.block_size, a.handoff.reroutes);
  if (a.handoff.active)
    x.output = x.record.output_tokens = 1;  // decoding is the decode instance's
  // Its KV at the last step covers the prompt and every generated token but the last one.
  if (x.layout.blocks_for(x.prompt + uint64_t{x.output} - 1) > st.config.device_blocks) {
    ++st.report.rejected;  // it could never be held on the device whole
    x.record.rejected = true;
    return request_done{id, now, true};
  }
  if (a.handoff.active)
    expect_handoff(self, x, a);
  else
    expect_output(self, x, a.blocks);
  ++st.awaiting_ready;
  self->request(st.controller, caf::infinite, arrival{id, std::move(a.blocks)})
    .then([=](const ready& rd) { on_ready(self, rd); },
          [=](const caf::error& e) { fail(self, e); });
  auto promise = self->make_response_promise<request_done>();
  st.answers.emplace(id, promise);
  return promise;
}

void on_step_end(self_ptr self, uint64_t step);

// -- PD, decode side: preemption drops the request (docs/fastdeploy.md §4) -------------------------

// FastDeploy's decode role drops a victim instead of queueing it again; the router sends it
// through prefill once more. swap_to_host keeps it here: its host copies are this instance's, and
// a dropped request would never swap them back (docs/preemption.md).
bool drops_victims(const scheduler_state& st) {
  return st.config.role == pd_role::decode
         && st.config.options.preemption != preemption_mode::swap_to_host;
}

void finish_drop(self_ptr self, request_id id, bool timed_out) {
  auto& st = self->state;
  auto w = st.dropping.extract(id);
  request_done d = std::move(w.mapped().done);
  d.at_ns = now_of(self);
  st.report.decode_drop_write_timeouts += timed_out;
  st.report.decode_drop_write_wait_ns = time_add(st.report.decode_drop_write_wait_ns,
                                                 d.at_ns - d.dropped_ns);
  answer(self, id, std::move(d));
}

// The save is a two-phase put per block: the request goes back to the router once every block
// it writes is visible, so that its next prefill can match them (FastDeploy writes before it
// drops, holding its scheduler meanwhile; here only the victim waits). Storage is asked at once,
// then after 1 us, and again after each wait doubled up to 1 ms, for at most 5 s in all: a
// failed put never becomes visible, and the next prefill computes what it missed.
constexpr int64_t drop_poll_first_ns = 1000;
constexpr int64_t drop_poll_limit_ns = 5'000'000'000;

void check_drop_written(self_ptr self, request_id id) {
  auto& st = self->state;
  self->request(st.config.storage, caf::infinite, exists_query{st.dropping.at(id).keys})
    .then(
      [=](const exists_reply& r) {
        auto& s = self->state;
        scheduler_state::drop_write& w = s.dropping.at(id);
        int64_t now = now_of(self);
        if (r.leading >= w.keys.size()) {
          finish_drop(self, id, false);
          return;
        }
        if (now - w.done.dropped_ns >= drop_poll_limit_ns) {
          finish_drop(self, id, true);
          return;
        }
        int64_t wait = std::min(visibility_poll_ns, drop_poll_first_ns << std::min(w.polls, 20u));
        ++w.polls;
        self->delayed_send(self, s.config.clock.until(self->clock(), time_add(now, wait)),
                           handoff_atom_v, id);
      },
      [=](const caf::error& e) { fail(self, e); });
}

// The controller has saved (by scheduler.preemption) and released the victims' blocks and
// forgotten them: each leaves with what its next pass needs.
void drop_victims(self_ptr self, const grant& g) {
  auto& st = self->state;
  uint32_t block_size = st.config.options.block_size;
  size_t key_at = 0;
  for (size_t i = 0; i < st.plan.preempted.size(); ++i) {
    request_id id = st.plan.preempted[i];
    uint32_t keys = i < g.dropped_key_counts.size() ? g.dropped_key_counts[i] : 0;
    KVTIER_ASSERT(key_at + keys <= g.dropped_keys.size());
    live_request& r = st.book.at(id);
    st.book.waiting.erase(std::find(st.book.waiting.begin(), st.book.waiting.end(), id));
    r.finished = true;
    request_done d = done_now(self, id);  // with how its handoff went
    d.dropped = true;
    d.dropped_ns = d.at_ns;
    // Its next prefill covers the prompt and every token generated so far, and samples the next
    // one (FastDeploy: need_prefill_tokens = num_total_tokens). One whose tokens are all there
    // (a failed handoff it was recomputing on D) samples its last token again instead.
    KVTIER_ASSERT(r.generated >= 1 && r.generated <= r.output);
    uint32_t kept = r.generated < r.output ? r.generated : r.generated - 1;
    d.resume_prompt = r.prompt + kept;
    d.resume_output = r.output - kept;
    auto blocks = st.decode_blocks.extract(id);
    d.resume_blocks = std::move(blocks.mapped());
    // The generated blocks the save named (apply_grant listed them as the controller did).
    auto listed = static_cast<uint32_t>(d.resume_blocks.size());
    if (r.layout.listed() > listed)
      name_private_blocks(id, r.layout.listed() - listed, block_size, d.resume_blocks);
    st.output_keys.erase(id);
    ++st.report.decode_drops;
    if (keys == 0) {
      answer(self, id, std::move(d));
      continue;
    }
    d.drop_saved = true;
    ++st.report.decode_drop_writes;
    st.report.decode_drop_write_blocks += keys;
    scheduler_state::drop_write w;
    w.keys.assign(g.dropped_keys.begin() + static_cast<long>(key_at),
                  g.dropped_keys.begin() + static_cast<long>(key_at + keys));
    key_at += keys;
    w.done = std::move(d);
    st.dropping.emplace(id, std::move(w));
    check_drop_written(self, id);
  }
}

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
    if (drops_victims(st))
      drop_victims(self, g);
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
  std::vector<int64_t>* layer_ends = nullptr;
  if (st.streams && !st.streams->empty()) {
    st.layer_ends.clear();
    layer_ends = &st.layer_ends;
  }
  pipeline_result p = run_pipeline(st.step_start, cost, st.config.compute.layers, g.layer_ready_ns,
                                   layer_ends);
  if (layer_ends)
    for (const work_item& w : st.items)
      st.streams->computed(w.req, w.start + w.tokens, *layer_ends);
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
  c.drop_preempted = !c.preempted.empty() && drops_victims(st);
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
  for (request_id id : st.decode_ready) {
    st.book.at(id).running = true;
    st.book.running.push_back(id);
  }
  st.decode_ready.clear();
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
  for (request_id id : out.finished) {
    if (st.config.role == pd_role::prefill) {
      begin_handoff(self, id, now);  // its blocks are released once they have been sent
      continue;
    }
    if (!write_output(self, id))
      st.finished.push_back(id);
    answer(self, id, done_now(self, id));
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
  if (config.role == pd_role::prefill && config.pd.transfer == pd_transfer::direct)
    st.streams = std::make_unique<prefill_streams>(config.pd, config.options.block_size,
                                                   config.compute.layers, config.block_bytes);
  return {
    [=](request_arrival& a) { return on_arrival(self, a); },
    [=](preallocate_request& p) { return on_preallocate(self, p); },
    [=](kv_handoff& k) { return on_kv_handoff(self, k); },
    [=](handoff_atom, uint64_t req) {
      if (self->state.dropping.contains(req))
        check_drop_written(self, req);      // a dropped victim's save: ask storage again
      else if (self->state.streams)
        complete_handoff(self, req, true);  // the last layer has arrived
      else
        check_visible(self, req);           // ask storage again
    },
    [=](step_atom, uint64_t step) { on_step_end(self, step); },  // 0: a plan tick
    [=](report_atom) -> scheduler_report {
      auto& s = self->state;
      scheduler_report r = s.report;
      r.drained = !s.busy && s.answers.empty() && s.awaiting_ready == 0
                  && s.book.running.empty() && s.book.waiting.empty() && s.finished.empty()
                  && s.awaiting_kv.empty() && s.decode_ready.empty() && s.handing_off.empty()
                  && s.writing_outputs == 0 && s.dropping.empty();
      for (const auto& [id, x] : s.book.all())
        r.requests.push_back(x.record);
      r.requests.insert(r.requests.end(), s.book.retired().begin(), s.book.retired().end());
      std::sort(r.requests.begin(), r.requests.end(),
                [](const request_record& a, const request_record& b) {
                  return a.req != b.req ? a.req < b.req : a.attempt < b.attempt;
                });
      if (s.streams) {
        r.pd_link_bytes = s.streams->link().bytes();
        r.pd_link_busy_ns = s.streams->link().busy_ns();
        r.pd_link_messages = s.streams->link().messages();
        r.handoff_blocks_sent += s.streams->blocks_sent();
        r.handoff_blocks_skipped = s.streams->blocks_skipped();
      }
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
