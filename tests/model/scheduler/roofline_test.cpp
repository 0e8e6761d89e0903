#include "model/scheduler/cost_model.hpp"
#include "model/scheduler/roofline.hpp"

#include <catch2/catch.hpp>

using namespace kvtier;

namespace {

// Llama-3-8B in bf16 on an H100 SXM's data-sheet peaks, efficiencies 1.
roofline_profile llama8b_on_h100() {
  roofline_profile r;
  model_spec& m = r.model;
  m.params = m.active_params = 8.03e9;
  m.layers = 32;
  m.hidden_size = 4096;
  m.attention_heads = 32;
  m.kv_heads = 8;
  m.head_dim = 128;
  m.kv_dtype = "bf16";
  r.gpu.bf16_tflops = 989;
  r.gpu.fp8_tflops = 1979;
  r.gpu.hbm_gbps = 3350;
  r.gpu.nvlink_gbps = 450;
  return r;
}

}  // namespace

TEST_CASE("roofline: a long prefill is compute-bound, its time the FLOPs over the peak",
          "[model][scheduler][roofline]") {
  roofline_profile r = llama8b_on_h100();
  batch_shape b;
  b.add_prefill(0, 8192);
  roofline_parts p = roofline_of(r, b);
  CHECK(p.compute_bound());
  double flops = 2 * 8.03e9 * 8192 + 2.0 * 32 * 32 * 256 * (8192.0 * 8193 / 2);
  CHECK(p.compute_ns == Approx(flops / 989e3));
  CHECK(p.work_ns() == Approx(p.compute_ns));
}

TEST_CASE("roofline: a decode step is memory-bound, its time weights and KV over HBM",
          "[model][scheduler][roofline]") {
  roofline_profile r = llama8b_on_h100();
  batch_shape b;
  for (int i = 0; i < 32; ++i)
    b.add_decode(1024);
  roofline_parts p = roofline_of(r, b);
  CHECK(!p.compute_bound());
  double bytes = 8.03e9 * 2 + 131072.0 * (32 * 1024 + 32);
  CHECK(p.memory_ns == Approx(bytes / 3350));
  CHECK(p.collective_ns == 0);
}

TEST_CASE("roofline: TP divides the work and adds two all-reduces per layer",
          "[model][scheduler][roofline]") {
  roofline_profile one = llama8b_on_h100();
  roofline_profile two = one;
  two.parallel.tp = 2;
  two.allreduce_latency_ns = 10000;
  batch_shape b;
  b.add_decode(4096);
  roofline_parts p1 = roofline_of(one, b), p2 = roofline_of(two, b);
  CHECK(p2.memory_ns == Approx(p1.memory_ns / 2));
  CHECK(p2.compute_ns == Approx(p1.compute_ns / 2));
  double ring = 2.0 * 1 / 2 * 4096 * 2;  // one token's activations, bf16
  CHECK(p2.collective_ns == Approx(2 * 32 * (ring / 450 + 10000)));
}

TEST_CASE("roofline: cost_of uses it under compute.model=roofline, the GPU's overhead first",
          "[model][scheduler][roofline]") {
  compute_profile c;
  c.model = compute_model::roofline;
  c.roofline = llama8b_on_h100();
  c.roofline.gpu.step_overhead_us = 3;
  c.layers = 32;
  c.step_overhead_ns = 4e6;  // the linear model's, not used
  batch_shape b;
  b.add_decode(100);
  step_cost cost = cost_of(c, b);
  CHECK(cost.overhead_ns == 3000);
  CHECK(cost.total_work_ns == static_cast<int64_t>(roofline_of(c.roofline, b).work_ns() + 0.5));
}
