#include "actors/front_end/front_end.hpp"

#include "core/check.hpp"
#include "actors/front_end/workload.hpp"

namespace kvtier {

namespace {

struct front_end_state {
  static inline const char* name = "front_end";
  front_end_config config;
  std::shared_ptr<request_feed> feed;
  std::unique_ptr<workload> load;
  std::vector<scheduler_actor> instances;
  uint64_t next_instance = 0;
  int64_t arrival_wake = workload::never;
  uint64_t outstanding = 0;  // pushed, not answered
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
  if (st.failed || st.outstanding > 0 || !st.load->exhausted())
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

void on_done(self_ptr self, uint64_t session, uint32_t turn, const request_done& d) {
  auto& st = self->state;
  --st.outstanding;
  ++(d.rejected ? st.report.rejected : st.report.finished);
  st.load->finished(session, turn, d.at_ns);
  schedule_arrivals(self);
  finish_if_done(self);
}

void push(self_ptr self, trace_request r, std::vector<cache_block> blocks) {
  auto& st = self->state;
  size_t target = st.next_instance++ % st.instances.size();
  ++st.report.pushed;
  ++st.report.per_instance[target];
  ++st.outstanding;
  uint64_t session = r.session;
  uint32_t turn = r.turn;
  self->request(st.instances[target], caf::infinite, request_arrival{std::move(r), std::move(blocks)})
    .then([=](const request_done& d) { on_done(self, session, turn, d); },
          [=](caf::error& e) { fail(self, std::move(e)); });
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
  std::vector<cache_block> blocks;
  for (trace_request& r : due) {
    if (!st.feed->blocks_of(r, blocks)) {
      fail_on_input(self);
      return;
    }
    push(self, std::move(r), std::move(blocks));
    blocks.clear();
  }
  schedule_arrivals(self);
  finish_if_done(self);
}

front_end_actor::behavior_type front_end_behavior(self_ptr self, front_end_config config,
                                                  std::shared_ptr<request_feed> feed,
                                                  std::vector<scheduler_actor> instances) {
  auto& st = self->state;
  KVTIER_ASSERT(!instances.empty());
  st.config = config;
  st.feed = std::move(feed);
  st.instances = std::move(instances);
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
  };
}

}  // namespace

front_end_actor spawn_front_end(caf::actor_system& sys, const front_end_config& config,
                                std::shared_ptr<request_feed> feed,
                                std::vector<scheduler_actor> instances) {
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
