// Virtual time never wraps: sums and conversions saturate at the limit (core/time_math.hpp),
// wherever the replay adds or converts times.

#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <random>

#include "caf/actor_system.hpp"
#include "caf/actor_system_config.hpp"

#include "model/scheduler/cost_model.hpp"
#include "model/scheduler/layer_pipeline.hpp"
#include "model/front_end/workload.hpp"
#include "core/sim_clock.hpp"
#include "core/time_math.hpp"
#include "model/links/link_model.hpp"

using namespace kvtier;

namespace {

constexpr int64_t max_i64 = std::numeric_limits<int64_t>::max();

trace_request session_turn(uint64_t seq, uint32_t n, int64_t think) {
  trace_request r;
  r.seq = seq;
  r.session = 1;
  r.turn = n;
  r.think_ns = think;
  r.follows_previous = n > 0;
  r.input_tokens = 16;
  return r;
}

}  // namespace

TEST_CASE("time math: sums and conversions saturate at the limit", "[time]") {
  CHECK(time_add(time_limit_ns, time_limit_ns) == time_limit_ns);
  CHECK(time_add(time_limit_ns - 5, 3) == time_limit_ns - 2);
  CHECK(time_from(1e300) == time_limit_ns);
  CHECK(time_from(std::numeric_limits<double>::infinity()) == time_limit_ns);
  CHECK(time_from(std::nan("")) == time_limit_ns);
  CHECK(time_from(-1e300) == 0);
  CHECK(time_from(2.5) == 3);
  CHECK(time_scaled(max_i64, 1) == time_limit_ns);
  CHECK(time_scaled(604'800'000'000'000, 1e5) == time_limit_ns);  // a week, 1e5 times over
  CHECK(time_scaled(1000, 2.5) == 2500);
}

TEST_CASE("time math: session think times that each fit but together do not", "[time][workload]") {
  // Turn 1 finishes at 1000; turn 2's think time alone fits in 64 bits but not added to it.
  std::vector<trace_request> v = {session_turn(0, 0, 0), session_turn(1, 1, max_i64 - 10)};
  auto next = std::make_shared<size_t>(0);
  workload w([v, next](trace_request& r) {
    if (*next >= v.size())
      return false;
    r = v[(*next)++];
    return true;
  });
  std::vector<trace_request> due;
  w.take_due(0, due);
  REQUIRE(due.size() == 1);
  w.finished(due[0], 1000);
  // Wrapped, it would arrive at once (in the past); saturated, it is due at the limit.
  CHECK(w.next_arrival() == time_limit_ns);
}

TEST_CASE("time math: a step's cost and pipeline saturate", "[time][cost]") {
  compute_profile p;
  p.prefill_attention_ns = 1e9;
  p.step_overhead_ns = 1e30;
  p.layers = 4;
  batch_shape b;
  b.add_prefill(4'000'000'000ull, 1'000'000'000ull);
  step_cost c = cost_of(p, b);
  CHECK(c.overhead_ns == time_limit_ns);
  CHECK(c.total_work_ns == time_limit_ns);
  CHECK(c.layer_ns >= 0);
  pipeline_result r = run_pipeline(time_limit_ns - 1, c, 4, {});
  CHECK(r.end_ns == time_limit_ns);
}

TEST_CASE("time math: a transfer on a slow link ends at the limit, not in the past",
          "[time][links]") {
  link_model m;
  auto slow = m.add_link("slow", 1e-3);
  m.start(time_limit_ns / 2, {slow}, {{1'000'000'000'000, 4'000'000'000'000'000'000}});
  std::vector<link_model::op_done> done;
  m.advance(time_limit_ns / 2 + 1'000'000'000'000, done);  // the latency has ended
  CHECK(m.next_event() == time_limit_ns);
}

TEST_CASE("time math: the wall clock's conversions saturate", "[time][clock]") {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  // A tiny speed: waits grow by 1/speed; a huge one: the clock itself runs far ahead.
  sim_clock slow(sys.clock().now(), 1e-300);
  CHECK(slow.until(sys.clock(), 1'000'000).count() == time_limit_ns);
  sim_clock fast(sys.clock().now() - std::chrono::hours(1), 1e300);
  CHECK(fast.now(sys.clock()) == time_limit_ns);
}

TEST_CASE("layer pipeline: a wait for copies reading reused blocks delays layer 0 and is counted "
          "apart from the swap-in's stall",
          "[core][pipeline]") {
  step_cost c;
  c.overhead_ns = 1000;
  c.layer_ns = 100;
  c.last_layer_ns = 100;
  // Swap-in layers land at 1500 and 3000; the reused blocks' copy is done at 2000.
  pipeline_result r = run_pipeline(0, c, 2, {1500, 3000}, nullptr, 0, 2000);
  CHECK(r.reuse_wait_ns == 1000);  // 1000 (overhead end) -> 2000
  CHECK(r.stall_ns == 3000 - 2100);  // layer 1 waits from 2100 to 3000
  CHECK(r.end_ns == 3100);
  // The same as charging the reuse as every layer's ready time (the old form), end for end.
  pipeline_result merged = run_pipeline(0, c, 2, {2000, 3000});
  CHECK(merged.end_ns == r.end_ns);
  CHECK(merged.stall_ns == r.stall_ns + r.reuse_wait_ns);
  // Overhead longer than the wait: nothing to wait for.
  CHECK(run_pipeline(0, c, 2, {}, nullptr, 0, 900).reuse_wait_ns == 0);
}

TEST_CASE("layer pipeline: with no layer waiting on a copy, the sum equals the layer loop",
          "[core][pipeline]") {
  // Asking for each layer's end takes the loop; the same call without it takes the sum.
  std::mt19937_64 rng(37);
  const int64_t big[] = {0, 1, 1000, 1'000'000'000, time_limit_ns / 3, time_limit_ns};
  for (int i = 0; i < 20000; ++i) {
    auto pick = [&](int64_t most) {
      return rng() % 4 == 0 ? big[rng() % std::size(big)] : static_cast<int64_t>(rng() % most);
    };
    step_cost c;
    c.overhead_ns = pick(1'000'000);
    c.layer_ns = pick(100'000);
    c.last_layer_ns = pick(100'000);
    auto layers = static_cast<uint32_t>(1 + rng() % 96);
    int64_t start = pick(1'000'000'000'000);
    int64_t wait = rng() % 2 ? 0 : static_cast<int64_t>(rng() % 1000);
    int64_t reused = rng() % 2 ? 0 : pick(1'000'000'000'000);
    std::vector<int64_t> ends;
    pipeline_result loop = run_pipeline(start, c, layers, {}, &ends, wait, reused);
    pipeline_result sum = run_pipeline(start, c, layers, {}, nullptr, wait, reused);
    INFO("case " << i);
    REQUIRE(sum.end_ns == loop.end_ns);
    REQUIRE(sum.stall_ns == loop.stall_ns);
    REQUIRE(sum.reuse_wait_ns == loop.reuse_wait_ns);
    REQUIRE(ends.size() == layers);
    REQUIRE(ends.back() == loop.end_ns);
  }
}
