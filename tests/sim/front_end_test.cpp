// The front end: requests pushed to instances by the router, answers counted, and bad input
// returned as the run's error and raised where the replay was started; each answer routed to
// the request that awaits it (front_end.cpp, "answers").

#include <catch2/catch.hpp>

#include <variant>

#include "actors/front_end/front_end.hpp"
#include "sim/trace/trace_reader.hpp"
#include "tests/actors/det_fixture.hpp"
#include "tests/sim/scenario.hpp"

using namespace kvtier;
using namespace kvtier::test;

namespace {

// Gives `good` requests, then fails the way a trace reader's bad line does.
class failing_feed : public request_feed {
 public:
  explicit failing_feed(uint64_t good) : good_(good) {}
  bool next(trace_request& out) override {
    if (seq_ == good_) {
      problem_ = input_problem{input_problem::kind::trace, "t.jsonl", good_ + 1, "hash_ids",
                               "expected a list"};
      return false;
    }
    out = request(seq_, static_cast<int64_t>(seq_) * 1000, {seq_ + 1, seq_ + 2}, 2);
    ++seq_;
    return true;
  }
  bool blocks_of(const trace_request& r, std::vector<cache_block>& out) override {
    out.clear();
    for (uint64_t id : r.ids)
      out.push_back({id * 7919, 16});
    return true;
  }
  std::optional<input_problem> problem() const override { return problem_; }

 private:
  uint64_t good_;
  uint64_t seq_ = 0;
  std::optional<input_problem> problem_;
};

deployment_plan two_instances(route_policy policy) {
  deployment_plan c = small_config(16, 0);
  instance_of(c).scheduler.compute.prefill_token_ns = 10;
  instance_of(c).scheduler.compute.decode_token_ns = 100;
  instance_config one = instance_of(c);
  c.instances = {one, one};
  c.instances[0].name = "mixed-0";
  c.instances[1].name = "mixed-1";
  c.front.router.policy = policy;
  c.front.router.session_affinity = false;
  return c;
}

}  // namespace

TEST_CASE("front end: bad input ends the run with the feed's file, line and field",
          "[actors][front_end]") {
  deployment_plan c = small_config(16, 0);
  try {
    run_full_replay(c, std::make_shared<failing_feed>(3), {});
    FAIL("no error");
  } catch (const trace_error& e) {
    CHECK(e.file() == "t.jsonl");
    CHECK(e.line() == 4);
    CHECK(e.field() == "hash_ids");
    CHECK(e.detail() == "expected a list");
  }
}

TEST_CASE("front end: round robin splits requests over two instances, each answered",
          "[actors][front_end][cluster]") {
  std::vector<trace_request> requests;
  for (uint64_t i = 0; i < 6; ++i)
    requests.push_back(request(i, static_cast<int64_t>(i) * 100, {i + 1}, 3));
  full_result r = run_scenario(two_instances(route_policy::round_robin), requests);
  REQUIRE(r.drained);
  CHECK(r.front_end.pushed == 6);
  CHECK(r.front_end.finished == 6);
  CHECK(r.front_end.per_instance == std::vector<uint64_t>{3, 3});
  REQUIRE(r.instances.size() == 2);
  CHECK(r.instances[0].scheduler.requests.size() == 3);
  CHECK(r.instances[1].scheduler.requests.size() == 3);
  CHECK(r.scheduler.requests.size() == 6);  // the sum, in id order
  for (size_t i = 0; i < 6; ++i)
    CHECK(r.scheduler.requests[i].req == i);
}

TEST_CASE("front end: cache aware sends a repeated prefix where it is cached",
          "[actors][front_end][cluster]") {
  // Request 0 computes blocks 1..4 on instance 0 (the first choice when nothing is cached);
  // request 1 arrives later with instance 1 idle and shares that prefix: it goes to instance 0.
  std::vector<trace_request> requests{request(0, 0, {1, 2, 3, 4}, 2),
                                      request(1, 10'000'000, {1, 2, 3, 4, 5}, 2)};
  full_result r = run_scenario(two_instances(route_policy::cache_aware), requests);
  REQUIRE(r.drained);
  CHECK(r.front_end.per_instance == std::vector<uint64_t>{2, 0});
  CHECK(record(r, 1).hit_blocks[0] == 4);
  // Round robin sends it to the other instance, which holds nothing.
  full_result rr = run_scenario(two_instances(route_policy::round_robin), requests);
  CHECK(rr.front_end.per_instance == std::vector<uint64_t>{1, 1});
  CHECK(record(rr, 1).hit_blocks[0] == 0);
}

namespace {

// A feed whose mapping throws what no feed should: the front end actor dies of it.
class throwing_feed : public failing_feed {
 public:
  throwing_feed() : failing_feed(5) {}
  bool blocks_of(const trace_request& r, std::vector<cache_block>& out) override {
    if (r.seq == 2)
      throw std::logic_error("a broken feed");
    return failing_feed::blocks_of(r, out);
  }
};

}  // namespace

TEST_CASE("front end: an actor that stops on its own ends the run with what stopped it",
          "[actors][front_end]") {
  deployment_plan c = small_config(16, 0);
  for (clock_mode mode : {clock_mode::virtual_time, clock_mode::wall}) {
    full_run_options o;
    o.mode = mode;
    o.speed = 1000;
    try {
      run_full_replay(c, std::make_shared<throwing_feed>(), o);
      FAIL("no error");
    } catch (const std::runtime_error& e) {
      CHECK_THAT(e.what(), Catch::Contains("the front end actor stopped"));
    }
  }
}

// -- answers: each request is sent to its scheduler, whose request_done comes back as a message --

namespace {

// Gives `n` requests, one every microsecond, each in its own session.
class listed_feed : public request_feed {
 public:
  explicit listed_feed(uint64_t n) : n_(n) {}
  bool next(trace_request& out) override {
    if (seq_ == n_)
      return false;
    out = request(seq_, static_cast<int64_t>(seq_) * 1000, {seq_ + 1}, 2);
    out.session = seq_;
    ++seq_;
    return true;
  }
  bool blocks_of(const trace_request& r, std::vector<cache_block>& out) override {
    out.assign(1, {r.ids[0] * 7919, 16});
    return true;
  }
  std::optional<input_problem> problem() const override { return std::nullopt; }

 private:
  uint64_t n_;
  uint64_t seq_ = 0;
};

// A scheduler that answers every arrival at once: with its request id, with another request's,
// or with an error (as a scheduler refusing a message does).
enum class answer_with { its_id, another_id, error };

scheduler_actor::behavior_type answering_scheduler(scheduler_actor::pointer, answer_with how) {
  auto refused = [] { return caf::make_error(caf::sec::runtime_error, "refused"); };
  return {
    [=](request_arrival& a) -> caf::result<request_done> {
      if (how == answer_with::error)
        return refused();
      request_done d;
      d.req = how == answer_with::its_id ? a.req.seq : a.req.seq + 1000;
      return d;
    },
    [=](step_atom, uint64_t) {},
    [=](report_atom) { return scheduler_report{}; },
    [=](preallocate_request&) -> caf::result<preallocate_reply> { return refused(); },
    [=](kv_handoff&) -> caf::result<request_done> { return refused(); },
    [=](handoff_atom, uint64_t) {},
  };
}

// Runs a front end over two such schedulers (round robin) and `n` requests: its run's reply, or
// the error's text.
std::variant<front_end_report, std::string> run_answers(answer_with how, uint64_t n) {
  det_fixture fx;
  std::vector<front_end_target> targets;
  for (int i = 0; i < 2; ++i)
    targets.push_back({fx.sys.spawn(answering_scheduler, how), cache_controller_actor{},
                       pd_role::mixed});
  front_end_config config;
  config.clock = fx.clock;
  config.router.policy = route_policy::round_robin;
  auto fe = spawn_front_end(fx.sys, config, std::make_shared<listed_feed>(n), targets);
  auto handle = fx.self->request(fe, caf::infinite, run_atom_v);
  fx.run();
  std::variant<front_end_report, std::string> out = std::string("no reply");
  if (fx.self->mailbox().size() > 0)  // the system ran dry: a reply is there now or never
    handle.receive([&](front_end_report& r) { out = std::move(r); },
                   [&](const caf::error& e) { out = caf::to_string(e); });
  for (auto& t : targets)
    caf::anon_send_exit(t.scheduler, caf::exit_reason::user_shutdown);
  caf::anon_send_exit(fe, caf::exit_reason::user_shutdown);
  return out;
}

}  // namespace

TEST_CASE("front end: every answer reaches the request that awaits it, in any number",
          "[actors][front_end]") {
  for (uint64_t n : {1, 7, 2000}) {
    INFO(n << " requests");
    auto out = run_answers(answer_with::its_id, n);
    REQUIRE(std::holds_alternative<front_end_report>(out));
    const auto& r = std::get<front_end_report>(out);
    CHECK(r.pushed == n);
    CHECK(r.finished == n);
    CHECK(r.exhausted);
    CHECK(r.per_instance == std::vector<uint64_t>{(n + 1) / 2, n / 2});
  }
}

TEST_CASE("front end: a scheduler's refusal, or an answer nobody awaits, ends the run with an "
          "error", "[actors][front_end]") {
  auto refused = run_answers(answer_with::error, 3);
  REQUIRE(std::holds_alternative<std::string>(refused));
  CHECK_THAT(std::get<std::string>(refused), Catch::Contains("refused"));
  auto stray = run_answers(answer_with::another_id, 3);
  REQUIRE(std::holds_alternative<std::string>(stray));
  CHECK_THAT(std::get<std::string>(stray), Catch::Contains("an answer for request 1000"));
}
