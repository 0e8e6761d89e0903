#include "model/front_end/pd_handoffs.hpp"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>

#include "core/check.hpp"
#include "core/time_math.hpp"
#include "model/pd/handoff_fault.hpp"

namespace kvtier {

const char* to_string(handoff_stage s) {
  switch (s) {
    case handoff_stage::allocating: return "allocating";
    case handoff_stage::waiting: return "waiting";
    case handoff_stage::prefilling: return "prefilling";
    case handoff_stage::decoding: return "decoding";
  }
  return "?";
}

bool handoff_transition_allowed(handoff_stage from, handoff_stage to) {
  using s = handoff_stage;
  switch (from) {
    case s::allocating: return to == s::waiting || to == s::prefilling;
    case s::waiting: return to == s::allocating;
    case s::prefilling: return to == s::decoding;
    case s::decoding: return false;
  }
  return false;
}

pd_handoffs::pd_handoffs(const pd_options& options, std::vector<size_t> entry,
                         std::vector<size_t> decoders)
    : options_(options), entry_(std::move(entry)), decoders_(std::move(decoders)),
      decoding_(decoders_.size(), 0) {
  KVTIER_ASSERT(!entry_.empty() && !decoders_.empty());
}

// As KVTIER_ASSERT (core/check.hpp), with the stages named: a broken flow must stop the run
// where it broke, not hand a request off twice or lose one.
pd_handoffs::handoff& pd_handoffs::at(request_id id, handoff_stage expected) {
  auto it = handoffs_.find(id);
  if (it == handoffs_.end() || it->second.stage != expected) {
    std::fprintf(stderr, "kvtier: internal error: PD handoff of request %llu: expected %s, %s\n",
                 static_cast<unsigned long long>(id), to_string(expected),
                 it == handoffs_.end() ? "not in the flow"
                                       : (std::string("at ") + to_string(it->second.stage)).c_str());
    std::abort();
  }
  return it->second;
}

void pd_handoffs::move(handoff& h, handoff_stage next) const {
  if (!handoff_transition_allowed(h.stage, next)) {
    std::fprintf(stderr, "kvtier: internal error: PD handoff stage %s -> %s is not allowed\n",
                 to_string(h.stage), to_string(next));
    std::abort();
  }
  h.stage = next;
}

// The decoder with the fewest requests in flight (the first of equals).
size_t pd_handoffs::ask(handoff& h) {
  size_t best = 0;
  for (size_t d = 1; d < decoding_.size(); ++d)
    if (decoding_[d] < decoding_[best])
      best = d;
  ++decoding_[best];
  h.decoder = best;
  return best;
}

// A request a decode instance dropped is not failed for want of decode room: the deployment
// took it in and chose to drop it, so it asks again until some decode instance has room.
bool pd_handoffs::retries(const handoff& h) const {
  return options_.retry_decode_resource || h.reroutes > 0;
}

size_t pd_handoffs::begin(size_t prefill, request_arrival a) {
  KVTIER_ASSERT(prefill < entry_.size());
  request_id id = a.req.seq;
  handoff h;
  h.prefill = prefill;
  h.key = a.req;  // the answers need no block ids
  h.key.ids.clear();
  h.key.tokens.clear();
  h.reroutes = a.handoff.reroutes;
  h.arrival = std::move(a);
  auto [it, fresh] = handoffs_.emplace(id, std::move(h));
  KVTIER_ASSERT(fresh);
  return ask(it->second);
}

preallocate_request pd_handoffs::preallocation(request_id id) const {
  return preallocate_request{handoffs_.at(id).arrival};
}

std::pair<prefill_answer, handoff_end> pd_handoffs::never_prefilled(request_id id, bool rejected,
                                                                    int64_t now_ns,
                                                                    front_end_report& report) {
  auto it = handoffs_.find(id);
  const handoff& h = it->second;
  ++(rejected ? report.rejected : report.failed);
  // No instance records it: the front end does, so that the replay counts every request it
  // read once (docs/outputs.md, "--mode full").
  request_record r;
  r.req = id;
  r.file = h.key.file;
  r.line = h.key.line;
  r.arrival_ns = h.key.arrival_ns;
  r.input_tokens = h.key.input_tokens;
  r.output_tokens = h.key.output_tokens;
  r.rejected = rejected;
  r.failed = !rejected;
  report.never_prefilled.push_back(r);
  std::pair<prefill_answer, handoff_end> out{{h.prefill, h.key.input_tokens},
                                              {h.key.session, h.key.turn, now_ns}};
  handoffs_.erase(it);
  return out;
}

allocation_step pd_handoffs::on_preallocated(request_id id, size_t d, const preallocate_reply& r,
                                             int64_t now_ns, front_end_report& report) {
  handoff& h = at(id, handoff_stage::allocating);
  KVTIER_ASSERT(d == h.decoder);
  allocation_step out;
  if (r.verdict != preallocation_verdict::granted) {
    --decoding_[d];
    if (r.verdict == preallocation_verdict::never_fits) {
      out.what = allocation_step::next::never_prefilled;
      std::tie(out.answer, out.end) = never_prefilled(id, true, now_ns, report);
      return out;
    }
    ++report.preallocation_refusals;
    // FastDeploy's D sends no refusal: P polls until its wait runs out, or asks again.
    if (h.deadline < 0)
      h.deadline = time_add(now_ns, options_.wait_decode_resource_ns);
    move(h, handoff_stage::waiting);
    out.what = allocation_step::next::wait;
    out.wake_ns = retries(h) ? time_add(now_ns, options_.retry_interval_ns) : h.deadline;
    return out;
  }
  move(h, handoff_stage::prefilling);
  ++report.per_instance[decoders_[d]];
  ++report.per_instance[entry_[h.prefill]];
  out.what = allocation_step::next::prefill;
  out.instance = entry_[h.prefill];
  out.arrival = std::move(h.arrival);
  out.arrival.handoff.active = true;
  out.arrival.handoff.decode_has_blocks =
    options_.transfer == pd_transfer::direct ? r.device_hit_blocks : 0;
  return out;
}

wait_step pd_handoffs::on_wait(request_id id, int64_t now_ns, front_end_report& report) {
  handoff& h = at(id, handoff_stage::waiting);
  wait_step out;
  if (retries(h)) {
    move(h, handoff_stage::allocating);
    out.ask_again = true;
    out.decoder = ask(h);
    return out;
  }
  ++report.decode_resource_timeouts;  // error 500: prefill waits for decode resource timeout
  std::tie(out.answer, out.end) = never_prefilled(id, false, now_ns, report);
  return out;
}

prefill_step pd_handoffs::on_prefilled(request_id id, const request_done& done,
                                       front_end_report& report) {
  handoff& h = at(id, handoff_stage::prefilling);
  move(h, handoff_stage::decoding);
  prefill_step out;
  out.answer = {h.prefill, h.key.input_tokens};
  out.decoder = h.decoder;
  h.prefill_end = done.prefill_end_ns;
  kv_handoff& k = out.handoff;
  k.req = id;
  k.first_token_ns = done.first_token_ns;
  if (done.rejected) {
    k.outcome = handoff_outcome::cancelled;
  } else if (!done.handoff_ok) {
    k.outcome = handoff_outcome::failed;
  } else {
    k.outcome = handoff_outcome::delivered;
    k.inject_failure = handoff_fails(options_.seed, id, options_.failure_rate);
    report.injected_failures += k.inject_failure;
  }
  return out;
}

// A handoff that reached decoding: recomputed on D after it failed, or timed.
void pd_handoffs::count_handoff(const handoff& h, const request_done& done,
                                front_end_report& report) const {
  if (done.recomputed) {
    ++report.recomputed;
    ++report.handoff_failures;
  } else {
    report.handoff_ns.push_back(done.decode_ready_ns - h.prefill_end);
  }
}

decode_step pd_handoffs::on_decoded(request_id id, const request_done& done,
                                    front_end_report& report) {
  handoff& h = at(id, handoff_stage::decoding);
  auto it = handoffs_.find(id);
  --decoding_[h.decoder];
  decode_step out;
  if (done.dropped) {
    // Its handoff went as for any request that reached decoding; then it goes round again,
    // as a request whose prompt is its prompt and the tokens generated so far. It stays one
    // request: counted once, finished once.
    count_handoff(h, done, report);
    out.rerouted = true;
    out.arrival.req = h.key;
    out.arrival.req.input_tokens = done.resume_prompt;
    out.arrival.req.output_tokens = done.resume_output;
    out.arrival.blocks = done.resume_blocks;
    out.arrival.handoff.reroutes = h.reroutes + 1;
    ++report.rerouted;
    report.rerouted_saved += done.drop_saved;
    handoffs_.erase(it);
    return out;
  }
  if (done.rejected) {
    ++report.rejected;
  } else if (done.failed) {
    ++report.failed;
    ++report.handoff_failures;
  } else {
    ++report.finished;
    count_handoff(h, done, report);
  }
  out.end = {h.key.session, h.key.turn, done.at_ns};
  handoffs_.erase(it);
  return out;
}

}  // namespace kvtier
