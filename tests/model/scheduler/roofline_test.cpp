#include "model/scheduler/cost_model.hpp"
#include "model/scheduler/roofline.hpp"
#include "tests/model/scheduler/llama3_8b.hpp"

#include <algorithm>

#include <catch2/catch.hpp>

using namespace kvtier;

namespace {

// Llama-3-8B in bf16 on an H100 SXM's data-sheet peaks, efficiencies 1.
roofline_profile llama8b_on_h100() {
  roofline_profile r;
  r.model = test::llama3_8b();
  r.gpu.bf16_tflops = 989;
  r.gpu.fp8_tflops = 1979;
  r.gpu.hbm_gbps = 3350;
  r.gpu.nvlink_gbps = 450;
  r.gpu.collective_mid_gbps = 49;
  r.gpu.collective_gbps = 370;
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
  two.gpu.collective_latency_us = 10;
  batch_shape b;
  b.add_decode(4096);
  roofline_parts p1 = roofline_of(one, b), p2 = roofline_of(two, b);
  CHECK(p2.memory_ns == Approx(p1.memory_ns / 2));
  CHECK(p2.compute_ns == Approx(p1.compute_ns / 2));
  double ring = 2.0 * 1 / 2 * 4096 * 2;  // one token's activations, bf16
  // A small message: its ring bytes at the mid-size rate.
  CHECK(p2.collective_ns == Approx(2 * 32 * (ring / 49 + 10000)));
  CHECK(allreduce_ns(two.gpu, 2, 4096 * 2) == Approx(ring / 49 + 10000));
  CHECK(allreduce_ns(two.gpu, 1, 4096 * 2) == 0);
  // A large one: its first MiB (of ring bytes, per byte of message) at the mid-size rate, the
  // rest at the bus bandwidth.
  double mib = 1024.0 * 1024, big = 64 * mib;
  CHECK(allreduce_ns(two.gpu, 8, big) ==
        Approx(10000 + 1.75 * mib / 49 + 1.75 * (big - mib) / 370));
  CHECK(handoff_ns(two.gpu, big) == Approx(10000 + mib / 49 + (big - mib) / 370));
}

TEST_CASE("roofline: the overlap blends the longer and the shorter of compute and memory",
          "[model][scheduler][roofline]") {
  roofline_profile r = llama8b_on_h100();
  batch_shape b;
  for (int i = 0; i < 64; ++i)
    b.add_decode(2048);
  r.gpu.overlap = 1;
  roofline_parts max = roofline_of(r, b);
  CHECK(max.work_ns() == Approx(std::max(max.compute_ns, max.memory_ns)));
  r.gpu.overlap = 0;
  roofline_parts sum = roofline_of(r, b);
  CHECK(sum.work_ns() == Approx(sum.compute_ns + sum.memory_ns));
  r.gpu.overlap = 0.25;
  roofline_parts mid = roofline_of(r, b);
  double lo = std::min(mid.compute_ns, mid.memory_ns), hi = std::max(mid.compute_ns, mid.memory_ns);
  CHECK(mid.work_ns() == Approx(hi + 0.75 * lo));
}

TEST_CASE("roofline: efficiencies scale their parts, layer overheads add per layer",
          "[model][scheduler][roofline]") {
  roofline_profile r = llama8b_on_h100();
  batch_shape b;
  b.add_prefill(0, 2048);
  roofline_parts base = roofline_of(r, b);
  r.gpu.attention_efficiency = 0.5;
  r.gpu.layer_overhead_us = 20;
  r.gpu.moe_layer_overhead_us = 100;  // not an MoE: not charged
  roofline_parts p = roofline_of(r, b);
  CHECK(p.attention_ns == Approx(2 * base.attention_ns));
  CHECK(p.compute_ns == Approx(base.compute_ns + base.attention_ns));
  CHECK(p.layer_ns == Approx(32 * 20e3));
  r.model.experts = 8;
  r.model.active_experts = 2;
  r.model.params = 46.7e9;
  r.model.active_params = 12.9e9;
  CHECK(roofline_of(r, b).layer_ns == Approx(32 * 120e3));
  // Each expert a step's tokens go to costs more: one token goes to exactly its 2 experts; 2,048
  // tokens to all 8 but for (3/4)^2048.
  r.gpu.moe_expert_overhead_us = 5;
  CHECK(roofline_of(r, b).layer_ns == Approx(32 * (120e3 + 8 * 5e3)));
  batch_shape one;
  one.add_decode(1000);
  CHECK(roofline_of(r, one).layer_ns == Approx(32 * (120e3 + 2 * 5e3)));
  CHECK(experts_touched(r.model, 1) == Approx(2));
  CHECK(experts_touched(r.model, 2) == Approx(8 * (1 - 0.75 * 0.75)));
}

TEST_CASE("roofline: a kernel reading KV per query head reads a GQA group's KV that often",
          "[model][scheduler][roofline]") {
  roofline_profile r = llama8b_on_h100();
  batch_shape b;
  for (int i = 0; i < 16; ++i)
    b.add_decode(4096);
  roofline_parts grouped = roofline_of(r, b);
  r.kv_reads = decode_kv_reads::per_query_head;
  roofline_parts per_head = roofline_of(r, b);
  // 32 query heads over 8 KV heads: the context's KV is read 4 times, the new tokens' once.
  double context_kv = 131072.0 * 16 * 4096;
  CHECK(per_head.memory_ns - grouped.memory_ns == Approx(3 * context_kv / 3350));
}

TEST_CASE("roofline: MLA decode attends in the latent space", "[model][scheduler][roofline]") {
  roofline_profile r = llama8b_on_h100();
  model_spec& m = r.model;
  m.params = 671e9;
  m.active_params = 37e9;
  m.layers = 61;
  m.hidden_size = 7168;
  m.attention_heads = 128;
  m.kv_heads = 128;
  m.kv_lora_rank = 512;
  m.rope_head_dim = 64;
  m.experts = 256;
  m.active_experts = 8;
  batch_shape b;
  b.add_decode(10000);
  roofline_parts p = roofline_of(r, b);
  CHECK(p.attention_ns == Approx(2.0 * 61 * 128 * 1088 * 10000 / 989e3));
}

TEST_CASE("roofline: weights' dtype picks the peak, 4-bit weights read less",
          "[model][scheduler][roofline]") {
  roofline_profile r = llama8b_on_h100();
  r.gpu.int8_tops = 1979;
  batch_shape b;
  b.add_prefill(0, 4096);
  double bf16 = roofline_of(r, b).compute_ns - roofline_of(r, b).attention_ns;
  r.model.weight_dtype = "int8";
  r.model.weight_bits = 8;
  CHECK(roofline_of(r, b).compute_ns - roofline_of(r, b).attention_ns == Approx(bf16 * 989 / 1979));
  r.model.weight_dtype = "fp4";  // H100 has no FP4 units: weight-only, BF16 multiplies
  r.model.weight_bits = 4.5;
  CHECK(roofline_of(r, b).compute_ns - roofline_of(r, b).attention_ns == Approx(bf16));
  r.gpu.fp4_tflops = 9000;
  CHECK(roofline_of(r, b).compute_ns - roofline_of(r, b).attention_ns ==
        Approx(bf16 * 989 / 9000));
  batch_shape one;
  one.add_decode(1);
  r.model.weight_dtype = "int4";
  r.model.weight_bits = 4.25;
  CHECK(roofline_of(r, one).memory_ns == Approx((8.03e9 * 4.25 / 8 + 131072.0 * 2) / 3350));
}

TEST_CASE("roofline: pipeline stages run serially, micro-batches overlap them",
          "[model][scheduler][roofline]") {
  roofline_profile one = llama8b_on_h100();
  roofline_profile pp = one;
  pp.parallel.pp = 4;
  pp.gpu.collective_latency_us = 10;
  batch_shape prefill;
  prefill.add_prefill(0, 8192);
  double mib = 1024.0 * 1024;
  double handoff = 10e3 + mib / 49 + (8192.0 * 4096 * 2 - mib) / 370;
  CHECK(roofline_of(pp, prefill).work_ns() ==
        Approx(roofline_of(one, prefill).work_ns() + 3 * handoff));
  // Four micro-batches of a compute-bound prefill: 7 stage slots of a quarter batch's quarter.
  pp.parallel.pp_microbatches = 4;
  roofline_parts m4 = roofline_of(pp, prefill);
  CHECK(m4.microbatches == 4);
  CHECK(m4.work_ns() ==
        Approx(7.0 / 4 * m4.serial_ns() + 3 * (10e3 + mib / 49 + (2048.0 * 4096 * 2 - mib) / 370)));
  CHECK(m4.work_ns() < 0.5 * roofline_of(one, prefill).work_ns());
  // A memory-bound decode step re-reads the weights per micro-batch: no gain.
  batch_shape decode;
  for (int i = 0; i < 8; ++i)
    decode.add_decode(512);
  pp.parallel.pp_microbatches = 1;
  double serial = roofline_of(pp, decode).work_ns();
  pp.parallel.pp_microbatches = 4;
  CHECK(roofline_of(pp, decode).work_ns() > serial);
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
