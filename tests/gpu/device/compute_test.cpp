// Compute emulation: calibrated busy layers, and layer l waiting for exactly H2D layer l.

#include <cmath>

#include <catch2/catch.hpp>

#include "support.hpp"

using namespace kvtier::gpu;
using namespace kvtier::gpu::test;

TEST_CASE("compute: calibrated layers take the time asked", "[gpu][compute]") {
  auto cache = make_kv_cache(make_config(small_shape(), 8, 8));
  kv_cache& c = *cache;
  compute_calibration cal = c.calibrate_compute();
  INFO("overhead " << cal.overhead_ns << " ns, scale " << cal.scale << ", timer tick "
                   << cal.timer_tick_ns << " ns, max error " << cal.max_error);
  CHECK(cal.timer_tick_ns > 0);
  CHECK(cal.max_error < 0.03);
  // Layer 0 starts on an idle stream and also carries the host's launch latency; the layers
  // after it are queued behind it, as in a real forward pass.
  std::vector<uint64_t> asked{50'000, 30'000, 200'000, 1'000'000};
  op_id id = c.submit_compute(asked);
  c.wait(id);
  compute_timing t = c.compute_time(id);
  REQUIRE(t.busy_ns.size() == asked.size());
  CHECK(t.busy_ns[0] >= 0.97 * asked[0]);
  for (size_t l = 1; l < asked.size(); ++l) {
    INFO("layer " << l << ": asked " << asked[l] << " ns, took " << t.busy_ns[l] << " ns");
    CHECK(std::abs(t.busy_ns[l] - asked[l]) <= 0.03 * asked[l] + 1000);
    CHECK(t.stall_ns[l] < 5000);  // nothing to wait for
  }
  c.release(id);
}

TEST_CASE("compute: layer l starts once H2D layer l is in place", "[gpu][compute]") {
  auto cache = make_kv_cache(make_config(llama_shape(16), 160, 160));
  kv_cache& c = *cache;
  c.calibrate_compute();
  const uint32_t layers = c.layout().shape.layers;
  auto pairs = scattered_pairs(3, 128, c.layout(), true);  // 8 MiB per layer: ~150 us each
  op_id h2d = c.submit_h2d(pairs);
  op_id comp = c.submit_compute(std::vector<uint64_t>(layers, 20'000), h2d);
  c.wait(comp);
  transfer_timing h = c.transfer_time(h2d);
  compute_timing t = c.compute_time(comp);
  double offset = c.start_offset_ns(h2d, comp);  // compute start on the H2D's time line
  uint32_t before_next = 0;
  for (uint32_t l = 0; l < layers; ++l) {
    double begin = offset + t.begin_ns[l];
    INFO("layer " << l << ": in place at " << h.layer_done_ns[l] << " ns, compute began at "
                  << begin << " ns");
    CHECK(begin >= h.layer_done_ns[l] - 2000);  // event timestamps resolve ~0.5-1 us
    if (l + 1 < layers && begin < h.layer_done_ns[l + 1])
      ++before_next;
  }
  // Compute of a layer takes 20 us and a layer lands every ~150 us: most layers start before the
  // next one lands, i.e. each waited for its own layer, not for the whole transfer (which would
  // make this 0). Not all of them: on a host whose PCIe timing jitters, two layers can land
  // within one event's resolution (27 and 28 of 31 were seen on an H200 host, against 29 to 31
  // before), so the bar is three quarters.
  CHECK(before_next >= layers - layers / 4);
  CHECK(t.stall_total_ns > 0.5 * h.total_ns);
  c.release(comp);
  c.release(h2d);
  // Data already in place: no stall worth the name (an order of magnitude below the wait for a
  // transfer in flight; what remains is event and launch overhead, a few us per layer).
  op_id again = c.submit_h2d(pairs);
  c.wait(again);
  op_id fast = c.submit_compute(std::vector<uint64_t>(layers, 20'000), again);
  c.wait(fast);
  CHECK(c.compute_time(fast).stall_total_ns < 0.1 * h.total_ns);
  c.release(fast);
  c.release(again);
}

TEST_CASE("compute: the lead runs first and waits for nothing", "[gpu][compute]") {
  auto cache = make_kv_cache(make_config(llama_shape(16), 160, 160));
  kv_cache& c = *cache;
  c.calibrate_compute();
  const uint32_t layers = c.layout().shape.layers;
  auto pairs = scattered_pairs(3, 128, c.layout(), true);  // ~150 us per layer
  op_id h2d = c.submit_h2d(pairs);
  // A 2 ms lead covers the first layers' arrival: layer 0 finds its data in place.
  op_id comp = c.submit_compute(std::vector<uint64_t>(layers, 20'000), h2d, 2'000'000);
  c.wait(comp);
  compute_timing t = c.compute_time(comp);
  CHECK(t.begin_ns[0] >= 1'900'000);
  CHECK(t.stall_ns[0] < 20'000);
  CHECK(t.stall_total_ns > 0);  // later layers still wait: the transfer takes ~5 ms
  c.release(comp);
  c.release(h2d);
}

TEST_CASE("compute: only after an H2D of as many layers", "[gpu][compute]") {
  auto cache = make_kv_cache(make_config(small_shape(), 8, 8));
  kv_cache& c = *cache;
  op_id d2h = c.submit_d2h({{1, 1}});
  CHECK_THROWS_WITH(c.submit_compute({1000, 1000, 1000, 1000}, d2h),
                    Catch::Contains("only for an H2D op"));
  op_id h2d = c.submit_h2d({{1, 1}});
  CHECK_THROWS_WITH(c.submit_compute({1000}, h2d), Catch::Contains("cannot follow H2D op"));
  CHECK_THROWS_WITH(c.compute_time(h2d), Catch::Contains("not a compute op"));
  c.release(d2h);
  c.release(h2d);
}
