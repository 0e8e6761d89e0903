#include "actors/front_end/front_end.hpp"

#include <deque>
#include <string>

#include <absl/container/flat_hash_map.h>

#include "core/check.hpp"
#include "model/front_end/pd_handoffs.hpp"
#include "model/front_end/workload.hpp"

namespace kvtier {

namespace {

// Answers: the front end sends each request_arrival and kv_handoff instead of requesting it,
// and the scheduler's request_done comes back as an ordinary message (CAF answers a message
// that was sent, not requested, that way, in the same mailbox queue a response would take, so
// the order of events is the same). A request's `.then` handler would sit in CAF 0.17's
// response table, a vector searched and erased from linearly: with thousands of requests in
// flight (the conversation trace's concurrent sessions) every answer walked thousands of entries,
// 5% of a full replay's instructions (BENCHMARKS.md, "Answers as messages"). Each request
// awaits one answer at a time.
enum class answer_kind : uint8_t { mixed, prefill, decode };

struct awaited_answer {
  answer_kind kind = answer_kind::mixed;
  size_t target = 0;   // mixed: the router's index of the instance
  trace_request key;   // mixed: what the answer needs (session, turn, prompt size)
};

struct front_end_state {
  static inline const char* name = "front_end";
  front_end_config config;
  std::shared_ptr<request_feed> feed;
  std::unique_ptr<workload> load;
  std::vector<front_end_target> instances;
  std::vector<size_t> entry;     // instances requests enter (mixed or prefill): the router's
  std::unique_ptr<pd_handoffs> handoffs;  // disaggregated only
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
  absl::flat_hash_map<request_id, awaited_answer> awaiting;  // by request id (answers, above)
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

void await_answer(self_ptr self, request_id id, awaited_answer a) {
  bool added = self->state.awaiting.emplace(id, std::move(a)).second;
  KVTIER_ASSERT(added);  // one answer awaited per request at a time
}

void on_prefilled(self_ptr self, request_id id, const request_done& done);
void on_decoded(self_ptr self, request_id id, const request_done& done);

// A scheduler's request_done: to whoever awaits it (answers, above).
void on_answer(self_ptr self, const request_done& d) {
  auto& st = self->state;
  auto it = st.awaiting.find(d.req);
  if (it == st.awaiting.end()) {
    fail(self, caf::make_error(caf::sec::runtime_error,
                               "front end: an answer for request " + std::to_string(d.req)
                                 + ", which awaits none"));
    return;
  }
  awaited_answer a = std::move(it->second);
  st.awaiting.erase(it);
  switch (a.kind) {
    case answer_kind::mixed:
      on_done(self, a.target, a.key, d);
      return;
    case answer_kind::prefill:
      on_prefilled(self, d.req, d);
      return;
    case answer_kind::decode:
      on_decoded(self, d.req, d);
      return;
  }
}

// -- PD: a decode instance preallocates, the prefill instance prefills and hands off ---------------
// (FastDeploy's splitwise flow, docs/fastdeploy.md §6; docs/cluster.md). model/front_end/
// pd_handoffs.hpp keeps each request's stage and the counts; this shell sends what it asks for.

void route_waiting(self_ptr self);

// The request is over, one way or another: its session's next turn may start its think time.
void end_handoff(self_ptr self, const handoff_end& e) {
  auto& st = self->state;
  st.load->finished(e.session, e.turn, e.at_ns);
  schedule_arrivals(self);
  finish_if_done(self);
}

// It never reached a prefill instance (it can never fit on D, or D never had room in time).
void end_before_prefill(self_ptr self, const prefill_answer& a, const handoff_end& e) {
  self->state.route->answered(a.prefill, a.prompt_tokens);
  end_handoff(self, e);
}

void on_decoded(self_ptr self, request_id id, const request_done& done) {
  auto& st = self->state;
  decode_step next = st.handoffs->on_decoded(id, done, st.report);
  if (!next.rerouted) {
    end_handoff(self, next.end);
    return;
  }
  st.routing.push_back(std::move(next.arrival));
  route_waiting(self);
}

void on_prefilled(self_ptr self, request_id id, const request_done& done) {
  auto& st = self->state;
  prefill_step next = st.handoffs->on_prefilled(id, done, st.report);
  st.route->answered(next.answer.prefill, next.answer.prompt_tokens);
  await_answer(self, id, {answer_kind::decode, 0, {}});
  self->send(st.instances[st.handoffs->decoder_instance(next.decoder)].scheduler, next.handoff);
}

void ask_decoder(self_ptr self, request_id id, size_t d);

void on_preallocated(self_ptr self, request_id id, size_t d, const preallocate_reply& r) {
  auto& st = self->state;
  allocation_step next = st.handoffs->on_preallocated(id, d, r, now_of(self), st.report);
  switch (next.what) {
    case allocation_step::next::never_prefilled:
      end_before_prefill(self, next.answer, next.end);
      return;
    case allocation_step::next::wait:
      self->delayed_send(self, st.config.clock.until(self->clock(), next.wake_ns),
                         handoff_atom_v, id);
      return;
    case allocation_step::next::prefill:
      await_answer(self, id, {answer_kind::prefill, 0, {}});
      self->send(st.instances[next.instance].scheduler, std::move(next.arrival));
      return;
  }
}

void ask_decoder(self_ptr self, request_id id, size_t d) {
  auto& st = self->state;
  self->request(st.instances[st.handoffs->decoder_instance(d)].scheduler, caf::infinite,
                st.handoffs->preallocation(id))
    .then([=](const preallocate_reply& r) { on_preallocated(self, id, d, r); },
          [=](caf::error& e) { fail(self, std::move(e)); });
}

// The wait for a decode instance's allocation: ask again, or give up with FastDeploy's error.
void on_decoder_wait(self_ptr self, request_id id) {
  auto& st = self->state;
  if (st.failed)
    return;
  wait_step next = st.handoffs->on_wait(id, now_of(self), st.report);
  if (next.ask_again)
    ask_decoder(self, id, next.decoder);
  else
    end_before_prefill(self, next.answer, next.end);
}

void begin_handoff(self_ptr self, size_t prefill, request_arrival a) {
  request_id id = a.req.seq;
  size_t d = self->state.handoffs->begin(prefill, std::move(a));
  ask_decoder(self, id, d);
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
  awaited_answer answer{answer_kind::mixed, target, {}};
  answer.key.session = a.req.session;
  answer.key.turn = a.req.turn;
  answer.key.input_tokens = a.req.input_tokens;
  await_answer(self, a.req.seq, std::move(answer));
  self->send(st.instances[st.entry[target]].scheduler, std::move(a));
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
  std::vector<size_t> decoders;
  for (size_t i = 0; i < st.instances.size(); ++i)
    (st.instances[i].role == pd_role::decode ? decoders : st.entry).push_back(i);
  KVTIER_ASSERT(!st.entry.empty() && st.config.disaggregated == !decoders.empty());
  if (st.config.disaggregated)
    st.handoffs = std::make_unique<pd_handoffs>(config.pd, st.entry, std::move(decoders));
  st.route = std::make_unique<router>(config.router, st.entry.size());
  st.report.per_instance.assign(st.instances.size(), 0);
  // A scheduler that refuses a sent message answers with an error message: the run fails, as
  // a requested message's error handler made it.
  self->set_error_handler([=](caf::error& e) { fail(self, std::move(e)); });
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
    [=](request_done& d) { on_answer(self, d); },
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
