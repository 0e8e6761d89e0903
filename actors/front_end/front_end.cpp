#include "actors/front_end/front_end.hpp"

#include <deque>

#include <absl/container/flat_hash_map.h>

#include "core/check.hpp"
#include "model/front_end/workload.hpp"
#include "model/pd/handoff_fault.hpp"
#include "model/pd/preallocation.hpp"

namespace kvtier {

namespace {

struct front_end_state {
  static inline const char* name = "front_end";
  front_end_config config;
  std::shared_ptr<request_feed> feed;
  std::unique_ptr<workload> load;
  std::vector<front_end_target> instances;
  std::vector<size_t> entry;     // instances requests enter (mixed or prefill): the router's
  std::vector<size_t> decoders;  // decode instances
  std::vector<uint64_t> decoding;  // requests preallocated on each decoder, not yet answered
  struct handoff {
    size_t prefill = 0;          // router index
    size_t decoder = 0;
    request_arrival arrival;     // until it is pushed to the prefill instance
    trace_request key;           // what the answers need (no block ids)
    int64_t deadline = -1;       // P gives up waiting for D's allocation then
    int64_t prefill_end = -1;
    uint32_t reroutes = 0;       // times a decode instance dropped it
  };
  absl::flat_hash_map<request_id, handoff> handoffs;
  std::unique_ptr<router> route;
  // arrived requests waiting for their instance, in arrival order (one probe round at a time)
  std::deque<request_arrival> routing;
  std::vector<prefix_hit> probed;
  size_t probes_due = 0;
  int64_t arrival_wake = workload::never;
  bool running = false;
  bool failed = false;
  caf::typed_response_promise<front_end_report> done;
  front_end_report report;
};

using self_ptr = front_end_actor::stateful_pointer<front_end_state>;

// Bad input travels as the error's context: ("input", kind, file, line, field, message).
caf::error input_error(const input_problem& p) {
  return caf::make_error(caf::sec::runtime_error, std::string("input"),
                         static_cast<uint8_t>(p.what), p.file, p.line, p.field, p.message);
}

int64_t now_of(self_ptr self) {
  return self->state.config.clock.now(self->clock());
}

void fail(self_ptr self, caf::error e) {
  auto& st = self->state;
  if (st.failed)
    return;
  st.failed = true;  // nothing more is pushed; what is in flight finishes
  st.done.deliver(std::move(e));
}

void fail_on_input(self_ptr self) {
  auto problem = self->state.feed->problem();
  KVTIER_ASSERT(problem.has_value());
  fail(self, input_error(*problem));
}

void finish_if_done(self_ptr self) {
  auto& st = self->state;
  const front_end_report& r = st.report;
  bool answered_all = r.pushed == r.finished + r.rejected + r.failed;
  if (st.failed || !answered_all || !st.routing.empty() || !st.load->exhausted())
    return;
  if (st.feed->problem()) {
    fail_on_input(self);
    return;
  }
  st.report.exhausted = true;
  st.done.deliver(st.report);
}

void schedule_arrivals(self_ptr self) {
  auto& st = self->state;
  if (st.failed)
    return;
  int64_t t = st.load->next_arrival();
  if (t == workload::never || t >= st.arrival_wake)
    return;
  st.arrival_wake = t;
  self->delayed_send(self, st.config.clock.until(self->clock(), t), wake_atom_v, uint64_t{0});
}

void on_done(self_ptr self, size_t target, const trace_request& r, const request_done& d) {
  auto& st = self->state;
  ++(d.rejected ? st.report.rejected : st.report.finished);
  st.route->answered(target, r.input_tokens);
  st.load->finished(r.session, r.turn, d.at_ns);
  schedule_arrivals(self);
  finish_if_done(self);
}

// -- PD: a decode instance preallocates, the prefill instance prefills and hands off ---------------
// (FastDeploy's splitwise flow, docs/fastdeploy.md §6; docs/cluster.md)

trace_request answer_key(const trace_request& r) {
  trace_request key = r;
  key.ids.clear();
  key.tokens.clear();
  return key;
}

// The request is over, one way or another: its session's next turn may start its think time.
void end_handoff(self_ptr self, request_id id, int64_t at_ns) {
  auto& st = self->state;
  auto it = st.handoffs.find(id);
  st.load->finished(it->second.key.session, it->second.key.turn, at_ns);
  st.handoffs.erase(it);
  schedule_arrivals(self);
  finish_if_done(self);
}

// It never reached a prefill instance (it can never fit on D, or D never had room in time).
void end_before_prefill(self_ptr self, request_id id, bool rejected) {
  auto& st = self->state;
  const auto& h = st.handoffs.at(id);
  st.route->answered(h.prefill, h.key.input_tokens);
  ++(rejected ? st.report.rejected : st.report.failed);
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
  st.report.never_prefilled.push_back(r);
  end_handoff(self, id, now_of(self));
}

size_t least_busy_decoder(const front_end_state& st) {
  size_t best = 0;
  for (size_t d = 1; d < st.decoding.size(); ++d)
    if (st.decoding[d] < st.decoding[best])
      best = d;
  return best;
}

void route_waiting(self_ptr self);

// A decode instance preempted it and dropped it (docs/fastdeploy.md §4): it goes through the
// router again, as a request whose prompt is its prompt and the tokens generated so far, to a
// prefill instance and then a decode instance. It stays one request: counted once, finished once.
void reroute(self_ptr self, request_id id, const request_done& done) {
  auto& st = self->state;
  auto it = st.handoffs.find(id);
  request_arrival a;
  a.req = it->second.key;
  a.req.input_tokens = done.resume_prompt;
  a.req.output_tokens = done.resume_output;
  a.blocks = done.resume_blocks;
  a.handoff.reroutes = it->second.reroutes + 1;
  st.handoffs.erase(it);
  ++st.report.rerouted;
  st.report.rerouted_saved += done.drop_saved;
  st.routing.push_back(std::move(a));
  route_waiting(self);
}

void on_decoded(self_ptr self, request_id id, size_t d, const request_done& done) {
  auto& st = self->state;
  --st.decoding[d];
  const auto& h = st.handoffs.at(id);
  if (done.dropped) {
    // Its handoff went as for any request that reached decoding; then it goes round again.
    if (done.recomputed) {
      ++st.report.recomputed;
      ++st.report.handoff_failures;
    } else {
      st.report.handoff_ns.push_back(done.decode_ready_ns - h.prefill_end);
    }
    reroute(self, id, done);
    return;
  }
  if (done.rejected) {
    ++st.report.rejected;
  } else if (done.failed) {
    ++st.report.failed;
    ++st.report.handoff_failures;
  } else {
    ++st.report.finished;
    if (done.recomputed) {
      ++st.report.recomputed;
      ++st.report.handoff_failures;
    } else {
      st.report.handoff_ns.push_back(done.decode_ready_ns - h.prefill_end);
    }
  }
  end_handoff(self, id, done.at_ns);
}

void on_prefilled(self_ptr self, request_id id, size_t d, const request_done& done) {
  auto& st = self->state;
  auto& h = st.handoffs.at(id);
  st.route->answered(h.prefill, h.key.input_tokens);
  h.prefill_end = done.prefill_end_ns;
  kv_handoff k;
  k.req = id;
  k.first_token_ns = done.first_token_ns;
  if (done.rejected) {
    k.outcome = handoff_outcome::cancelled;
  } else if (!done.handoff_ok) {
    k.outcome = handoff_outcome::failed;
  } else {
    k.outcome = handoff_outcome::delivered;
    k.inject_failure = handoff_fails(st.config.pd.seed, id, st.config.pd.failure_rate);
    st.report.injected_failures += k.inject_failure;
  }
  self->request(st.instances[st.decoders[d]].scheduler, caf::infinite, k)
    .then([=](const request_done& x) { on_decoded(self, id, d, x); },
          [=](caf::error& e) { fail(self, std::move(e)); });
}

// A request a decode instance dropped is not failed for want of decode room: the deployment
// took it in and chose to drop it, so it asks again until some decode instance has room.
bool retries_decode_resource(const front_end_state& st, const front_end_state::handoff& h) {
  return st.config.pd.retry_decode_resource || h.reroutes > 0;
}

void on_preallocated(self_ptr self, request_id id, size_t d, const preallocate_reply& r) {
  auto& st = self->state;
  auto& h = st.handoffs.at(id);
  preallocation_verdict verdict = r.verdict;
  if (verdict != preallocation_verdict::granted) {
    --st.decoding[d];
    if (verdict == preallocation_verdict::never_fits) {
      end_before_prefill(self, id, true);
      return;
    }
    ++st.report.preallocation_refusals;
    // FastDeploy's D sends no refusal: P polls until its wait runs out, or asks again.
    int64_t now = now_of(self);
    if (h.deadline < 0)
      h.deadline = time_add(now, st.config.pd.wait_decode_resource_ns);
    int64_t next = retries_decode_resource(st, h)
                     ? time_add(now, st.config.pd.retry_interval_ns) : h.deadline;
    self->delayed_send(self, st.config.clock.until(self->clock(), next), handoff_atom_v, id);
    return;
  }
  h.decoder = d;
  ++st.report.per_instance[st.decoders[d]];
  ++st.report.per_instance[st.entry[h.prefill]];
  request_arrival a = std::move(h.arrival);
  a.handoff.active = true;
  a.handoff.decode_has_blocks = st.config.pd.transfer == pd_transfer::direct ? r.device_hit_blocks : 0;
  self->request(st.instances[st.entry[h.prefill]].scheduler, caf::infinite, std::move(a))
    .then([=](const request_done& x) { on_prefilled(self, id, d, x); },
          [=](caf::error& e) { fail(self, std::move(e)); });
}

void ask_decoder(self_ptr self, request_id id) {
  auto& st = self->state;
  size_t d = least_busy_decoder(st);
  ++st.decoding[d];
  preallocate_request p{st.handoffs.at(id).arrival};
  self->request(st.instances[st.decoders[d]].scheduler, caf::infinite, std::move(p))
    .then([=](const preallocate_reply& r) { on_preallocated(self, id, d, r); },
          [=](caf::error& e) { fail(self, std::move(e)); });
}

// The wait for a decode instance's allocation: ask again, or give up with FastDeploy's error.
void on_decoder_wait(self_ptr self, request_id id) {
  auto& st = self->state;
  if (st.failed || !st.handoffs.contains(id))
    return;
  if (retries_decode_resource(st, st.handoffs.at(id))) {
    ask_decoder(self, id);
    return;
  }
  ++st.report.decode_resource_timeouts;  // error 500: prefill waits for decode resource timeout
  end_before_prefill(self, id, false);
}

void begin_handoff(self_ptr self, size_t prefill, request_arrival a) {
  auto& st = self->state;
  request_id id = a.req.seq;
  front_end_state::handoff h;
  h.prefill = prefill;
  h.key = answer_key(a.req);
  h.reroutes = a.handoff.reroutes;
  h.arrival = std::move(a);
  st.handoffs.emplace(id, std::move(h));
  ask_decoder(self, id);
}


void push(self_ptr self, size_t target, request_arrival a) {
  auto& st = self->state;
  if (a.handoff.reroutes == 0)
    ++st.report.pushed;  // each request once, however often a decode instance dropped it
  st.route->pushed(target, a.req);
  if (st.config.disaggregated) {
    begin_handoff(self, target, std::move(a));
    return;
  }
  ++st.report.per_instance[st.entry[target]];
  trace_request key;  // what the answer needs: the session turn and the prompt size
  key.session = a.req.session;
  key.turn = a.req.turn;
  key.input_tokens = a.req.input_tokens;
  self->request(st.instances[st.entry[target]].scheduler, caf::infinite, std::move(a))
    .then([=](const request_done& d) { on_done(self, target, key, d); },
          [=](caf::error& e) { fail(self, std::move(e)); });
}

// Routes the waiting requests in order; a cache-aware choice waits for every instance's probe.
void route_waiting(self_ptr self) {
  auto& st = self->state;
  while (!st.failed && st.probes_due == 0 && !st.routing.empty()) {
    request_arrival& next = st.routing.front();
    if (st.route->wants_probe(next.req) && st.probed.empty()) {
      st.probed.assign(st.entry.size(), prefix_hit{});
      st.probes_due = st.entry.size();
      for (size_t i = 0; i < st.entry.size(); ++i)
        self->request(st.instances[st.entry[i]].controller, caf::infinite,
                      prefix_lookup{next.blocks})
          .then(
            [=](const prefix_hit& h) {
              auto& s = self->state;
              s.probed[i] = h;
              if (--s.probes_due == 0)
                route_waiting(self);
            },
            [=](caf::error& e) { fail(self, std::move(e)); });
      return;
    }
    size_t target = st.route->pick(next.req, st.probed);
    st.probed.clear();
    request_arrival a = std::move(next);
    st.routing.pop_front();
    push(self, target, std::move(a));
  }
  finish_if_done(self);
}

void on_arrivals(self_ptr self) {
  auto& st = self->state;
  if (st.failed)
    return;
  int64_t now = now_of(self);
  if (st.arrival_wake <= now)
    st.arrival_wake = workload::never;
  std::vector<trace_request> due;
  st.load->take_due(now, due);
  st.report.read = st.load->read();
  for (trace_request& r : due) {
    request_arrival a;
    if (!st.feed->blocks_of(r, a.blocks)) {
      fail_on_input(self);
      return;
    }
    a.req = std::move(r);
    st.routing.push_back(std::move(a));
  }
  schedule_arrivals(self);
  route_waiting(self);
}

front_end_actor::behavior_type front_end_behavior(self_ptr self, front_end_config config,
                                                  std::shared_ptr<request_feed> feed,
                                                  std::vector<front_end_target> instances) {
  auto& st = self->state;
  KVTIER_ASSERT(!instances.empty());
  st.config = config;
  st.feed = std::move(feed);
  st.instances = std::move(instances);
  for (size_t i = 0; i < st.instances.size(); ++i)
    (st.instances[i].role == pd_role::decode ? st.decoders : st.entry).push_back(i);
  KVTIER_ASSERT(!st.entry.empty() && st.config.disaggregated == !st.decoders.empty());
  st.decoding.assign(st.decoders.size(), 0);
  st.route = std::make_unique<router>(config.router, st.entry.size());
  st.report.per_instance.assign(st.instances.size(), 0);
  auto* raw = st.feed.get();
  st.load = std::make_unique<workload>([raw](trace_request& r) { return raw->next(r); },
                                       config.time_scale);
  return {
    [=](run_atom) -> caf::result<front_end_report> {
      auto& s = self->state;
      if (s.running)
        return caf::make_error(caf::sec::runtime_error, "the front end runs once");
      s.running = true;
      s.done = self->make_response_promise<front_end_report>();
      auto promise = s.done;
      schedule_arrivals(self);
      finish_if_done(self);
      return promise;
    },
    [=](report_atom) -> front_end_report { return self->state.report; },
    [=](wake_atom, uint64_t) { on_arrivals(self); },
    [=](handoff_atom, uint64_t id) { on_decoder_wait(self, id); },
  };
}

}  // namespace

front_end_actor spawn_front_end(caf::actor_system& sys, const front_end_config& config,
                                std::shared_ptr<request_feed> feed,
                                std::vector<front_end_target> instances) {
  return sys.spawn(front_end_behavior, config, std::move(feed), std::move(instances));
}

std::optional<input_problem> input_problem_of(const caf::error& e) {
  const caf::message& ctx = e.context();
  if (!ctx.match_elements<std::string, uint8_t, std::string, uint64_t, std::string, std::string>()
      || ctx.get_as<std::string>(0) != "input")
    return std::nullopt;
  input_problem p;
  p.what = static_cast<input_problem::kind>(ctx.get_as<uint8_t>(1));
  p.file = ctx.get_as<std::string>(2);
  p.line = ctx.get_as<uint64_t>(3);
  p.field = ctx.get_as<std::string>(4);
  p.message = ctx.get_as<std::string>(5);
  return p;
}

}  // namespace kvtier
