#include <catch2/catch.hpp>

#include "tests/sim/scenario.hpp"

using namespace kvtier;
using namespace kvtier::test;

TEST_CASE("replay: two requests worked out by hand", "[actors][replay]") {
  deployment_plan c = small_config(100, 0);
  compute_profile& p = instance_of(c).scheduler.compute;
  p.step_overhead_ns = 1000;
  p.prefill_token_ns = 100;
  p.decode_token_ns = 1000;
  auto r = run_scenario(c, {request(0, 0, {1, 2}, 3), request(1, 1'000'000, {1, 2, 3}, 2)});
  require_clean(r);
  const request_record& a = record(r, 0);
  const request_record& b = record(r, 1);
  // R0: prefill of 32 tokens (1000 + 32 * 100 ns) samples token 1; two decode steps of
  // 1000 + 1000 ns sample tokens 2 and 3.
  CHECK(a.admitted_ns == 0);
  CHECK(a.first_token_ns == 4200);
  CHECK(a.finish_ns == 8200);
  CHECK(a.hit_blocks == std::array<uint32_t, 3>{0, 0, 0});
  // R1 shares R0's two blocks, still cached on the device: 16 new tokens to prefill.
  CHECK(b.hit_blocks == std::array<uint32_t, 3>{2, 0, 0});
  CHECK(b.hit_tokens[0] == 32);
  CHECK(b.first_token_ns == 1'000'000 + 1000 + 16 * 100);
  CHECK(b.finish_ns == b.first_token_ns + 2000);
  CHECK(r.scheduler.prefill_tokens == 48);
  CHECK(r.scheduler.decode_tokens == 3);
  CHECK(r.scheduler.busy_ns == 4200 + 2000 + 2000 + 2600 + 2000);
  CHECK(r.scheduler.layer_wait_ns == 0);
  CHECK(r.scheduler.preemptions == 0);
}

// R0 fills the device with blocks 1..8 (backed up to host); R1 pushes six of them to host;
// R2 asks for 1..8 plus one: 2 device hits, 6 host hits swapped in layer by layer while its one
// new block is computed. Per layer the swap-in moves 6 x 256 bytes: 1536 ns.
full_result overlap_run(double prefill_token_ns, int64_t layer_wait_ns = 0) {
  deployment_plan c = small_config(10, 64);
  instance_of(c).scheduler.compute.prefill_token_ns = prefill_token_ns;
  instance_of(c).scheduler.compute.layer_wait_ns = layer_wait_ns;
  std::vector<uint64_t> first{1, 2, 3, 4, 5, 6, 7, 8};
  std::vector<uint64_t> other{11, 12, 13, 14, 15, 16, 17, 18};
  std::vector<uint64_t> again = first;
  again.push_back(9);
  return run_scenario(c, {request(0, 0, first, 1), request(1, 1'000'000'000, other, 1),
                          request(2, 2'000'000'000, again, 1)});
}

TEST_CASE("replay: a swap-in is hidden when each layer computes longer than it loads",
          "[actors][replay][overlap]") {
  auto r = overlap_run(1000);  // 16 tokens: 16000 ns, 4000 per layer >= 1536
  require_clean(r);
  const request_record& x = record(r, 2);
  CHECK(x.hit_blocks == std::array<uint32_t, 3>{2, 6, 0});
  // Layer 0 waits for its data (1536 ns); every later layer is in place before it is needed.
  CHECK(x.first_token_ns - x.admitted_ns == 1536 + 16000);
  CHECK(r.scheduler.layer_wait_ns == 1536);
}

TEST_CASE("replay: a swap-in is exposed when each layer loads longer than it computes",
          "[actors][replay][overlap]") {
  auto r = overlap_run(200);  // 3200 ns: 800 per layer < 1536
  require_clean(r);
  const request_record& x = record(r, 2);
  CHECK(x.hit_blocks == std::array<uint32_t, 3>{2, 6, 0});
  // Layer i arrives at 1536 (i + 1) and computes for 800 ns: the last ends at 6144 + 800.
  CHECK(x.first_token_ns - x.admitted_ns == 6944);
  CHECK(r.scheduler.layer_wait_ns == 1536 + 3 * (1536 - 800));
}

TEST_CASE("replay: each layer of a step after a swap-in loses the GPU's event wait",
          "[actors][replay][overlap]") {
  // links.h2d_layer_wait_us, as a calibration measures it (docs/gpu.md): 100 ns per layer.
  auto r = overlap_run(1000, 100);
  require_clean(r);
  const request_record& x = record(r, 2);
  CHECK(x.hit_blocks == std::array<uint32_t, 3>{2, 6, 0});
  // As when hidden, plus 100 ns before each of the 4 layers of R2's step; the steps of R0 and
  // R1 swap nothing in and wait for nothing.
  CHECK(x.first_token_ns - x.admitted_ns == 1536 + 4 * 100 + 16000);
  CHECK(r.scheduler.layer_wait_ns == 1536 + 4 * 100);
}

TEST_CASE("replay: a request short of blocks preempts the last admitted, which recomputes",
          "[actors][replay][preemption]") {
  deployment_plan c = small_config(6, 0);
  instance_of(c).scheduler.compute.step_overhead_ns = 1000;
  instance_of(c).scheduler.compute.prefill_token_ns = 10;
  instance_of(c).scheduler.compute.decode_token_ns = 1000;
  // R0: 4 blocks of prompt + 2 of output fills the device alone; R1 gets in first while R0 has
  // not grown, then R0's growth preempts it (last admitted, first out).
  auto r = run_scenario(c, {request(0, 0, {1, 2, 3, 4}, 20), request(1, 0, {10, 11}, 20)});
  require_clean(r);
  const request_record& a = record(r, 0);
  const request_record& b = record(r, 1);
  CHECK(r.scheduler.preemptions >= 1);
  CHECK(b.preemptions >= 1);
  CHECK(a.preemptions == 0);
  CHECK(b.finish_ns > a.finish_ns);  // it waited for R0 to finish and free the device
  CHECK(r.scheduler.recomputed_tokens >= 16);
  CHECK(b.computed_tokens > 32);  // its prompt, and again what was lost
}

TEST_CASE("replay: identical inputs give identical results", "[actors][replay][determinism]") {
  deployment_plan c = small_config(12, 20);
  instance_of(c).cache.policy = write_policy::write_back;
  instance_of(c).scheduler.compute.step_overhead_ns = 500;
  instance_of(c).scheduler.compute.prefill_token_ns = 50;
  instance_of(c).scheduler.compute.decode_token_ns = 700;
  std::vector<trace_request> reqs;
  for (uint64_t i = 0; i < 30; ++i)
    reqs.push_back(request(i, static_cast<int64_t>(i) * 3000, {i % 4 + 1, i % 3 + 10, i + 100}, 5));
  auto x = run_scenario(c, reqs);
  auto y = run_scenario(c, reqs);
  require_clean(x);
  REQUIRE(x.scheduler.requests.size() == y.scheduler.requests.size());
  for (size_t i = 0; i < x.scheduler.requests.size(); ++i) {
    const auto &p = x.scheduler.requests[i], &q = y.scheduler.requests[i];
    CHECK(p.first_token_ns == q.first_token_ns);
    CHECK(p.finish_ns == q.finish_ns);
    CHECK(p.hit_blocks == q.hit_blocks);
  }
  CHECK(x.messages == y.messages);
  CHECK(x.engine.bytes == y.engine.bytes);
  CHECK(x.controller.device_evictions == y.controller.device_evictions);
}

TEST_CASE("replay: the same actors on the wall clock give the virtual run's hits and order",
          "[actors][replay][wall_clock]") {
  // Requests 50 ms apart, each a few ms of work: far apart enough that thread scheduling jitter,
  // even on a loaded machine, cannot reorder anything.
  deployment_plan c = small_config(10, 40);
  instance_of(c).scheduler.compute.step_overhead_ns = 1'000'000;
  instance_of(c).scheduler.compute.prefill_token_ns = 20'000;
  instance_of(c).scheduler.compute.decode_token_ns = 500'000;
  instance_of(c).controller.check_every = 0;
  std::vector<trace_request> reqs;
  for (uint64_t i = 0; i < 10; ++i)
    reqs.push_back(request(i, static_cast<int64_t>(i) * 50'000'000,
                           {1, 2, 3 + i % 3, 10 + i}, 3));
  auto simulated = run_scenario(c, reqs);
  full_run_options wall;
  wall.mode = clock_mode::wall;
  auto real = run_scenario(c, reqs, wall);
  require_clean(simulated);
  require_clean(real);
  auto order = [](const full_result& r) {
    std::vector<std::pair<int64_t, request_id>> v;
    for (const auto& x : r.scheduler.requests)
      v.emplace_back(x.finish_ns, x.req);
    std::sort(v.begin(), v.end());
    std::vector<request_id> ids;
    for (auto& p : v)
      ids.push_back(p.second);
    return ids;
  };
  CHECK(order(real) == order(simulated));
  for (uint64_t i = 0; i < reqs.size(); ++i) {
    INFO("request " << i);
    CHECK(record(real, i).hit_blocks == record(simulated, i).hit_blocks);
    // Wall time stays close to virtual time (a step's work lands within ms of its plan).
    CHECK(record(real, i).finish_ns == Approx(record(simulated, i).finish_ns).margin(25e6));
  }
}

TEST_CASE("replay: under write_back, a step reusing evicted blocks starts after their D2H",
          "[actors][replay][write_policy]") {
  deployment_plan c = small_config(2, 4);
  instance_of(c).cache.policy = write_policy::write_back;
  instance_of(c).scheduler.compute.prefill_token_ns = 100;
  auto r = run_scenario(c, {request(0, 0, {1, 2}, 1), request(1, 1'000'000, {3, 4}, 1)});
  require_clean(r);  // check_step_start found no step computing under a D2H
  CHECK(r.controller.write_backs == 2);
  // R1's blocks are R0's, written back first: 2 x 1024 bytes at 1 byte/ns before layer 0.
  const request_record& b = record(r, 1);
  CHECK(b.first_token_ns == 1'000'000 + 2048 + 32 * 100);
  // That wait is for reused blocks, not for a swap-in: a reuse wait (layer_pipeline.hpp).
  CHECK(r.scheduler.reuse_wait_ns == 2048);
  CHECK(r.scheduler.layer_wait_ns == 0);
}
