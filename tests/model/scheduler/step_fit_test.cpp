// The step-model calibration's arithmetic: a static batch's time against a step-by-step
// reference on random shapes, and the fit recovering factors it generated its points from.

#include "model/scheduler/cost_model.hpp"
#include "model/scheduler/step_fit.hpp"
#include "tests/model/scheduler/llama3_8b.hpp"

#include <catch2/catch.hpp>

#include <random>

using namespace kvtier;

namespace {

roofline_profile llama8b(const char* gpu, double hbm) {
  roofline_profile r;
  r.model = test::llama3_8b();
  r.gpu.name = gpu;
  r.gpu.bf16_tflops = 989;
  r.gpu.fp8_tflops = 1979;
  r.gpu.hbm_gbps = hbm;
  r.gpu.collective_latency_us = 9;
  r.gpu.collective_mid_gbps = 49;
  r.gpu.collective_gbps = 370;
  return r;
}

step_factors some_factors() {
  step_factors f;
  f.gpus["x"] = {0.6, 0.9};
  f.gpus["y"] = {0.45, 0.8};
  f.step_overhead_us = 300;
  f.attention_efficiency = 0.4;
  f.overlap = 0.3;
  f.layer_overhead_us = 60;
  f.moe_layer_overhead_us = 0;
  f.moe_expert_overhead_us = 5;
  return f;
}

// A static batch, every decode step on its own: what the grouped runs of predict_seconds stand
// for. Where a decode step samples the first token, the prefill leaves it the prompt's last
// token (none for a one-token prompt) and the batch runs `output` decode steps.
double reference_generate(const step_measurement& m, const step_factors& f) {
  roofline_profile r = m.profile;
  r.gpu = with_factors(m, f);
  auto step = [&](const batch_shape& b) {
    return (r.gpu.step_overhead_us * 1e3 + roofline_of(r, b).work_ns()) / 1e9;
  };
  bool by_decode = m.first_token == first_token_step::decode;
  uint64_t prefilled = by_decode ? m.prompt - 1 : m.prompt;
  batch_shape prefill;
  for (uint64_t i = 0; i < m.batch && prefilled > 0; ++i)
    prefill.add_prefill(0, prefilled);
  double total = prefilled > 0 ? step(prefill) : 0.0;
  for (uint64_t k = by_decode ? 0 : 1; k < m.output; ++k) {
    batch_shape d;
    for (uint64_t i = 0; i < m.batch; ++i)
      d.add_decode(m.prompt + k);
    total += step(d);
  }
  return total;
}

}  // namespace

TEST_CASE("step fit: a static batch's time matches its steps one by one, random shapes",
          "[model][scheduler][calibration]") {
  std::mt19937_64 rng(7);
  step_factors f = some_factors();
  for (int round = 0; round < 40; ++round) {
    step_measurement m;
    m.gpu = round % 2 ? "x" : "y";
    m.profile = llama8b(m.gpu.c_str(), 3350);
    m.profile.parallel.tp = 1u << (rng() % 3);
    m.kind = measured_kind::generate;
    m.batch = 1 + rng() % 64;
    m.prompt = 1 + rng() % 3000;
    m.output = 1 + rng() % 300;
    f.overlap = (rng() % 5) / 4.0;
    if (round % 3 == 0)
      m.prompt = 1;  // a decode run: LMDeploy's prompt_tokens 1 rows
    m.first_token = rng() % 2 ? first_token_step::decode : first_token_step::prefill;
    INFO("round " << round << ": batch " << m.batch << ", " << m.prompt << " in, " << m.output
                  << " out, overlap " << f.overlap << ", first token by a decode step "
                  << (m.first_token == first_token_step::decode));
    // Within a run of steps the model is linear in the context but for the max: 0.1%.
    CHECK(predict_seconds(m, f) == Approx(reference_generate(m, f)).epsilon(1e-3));
  }
}

TEST_CASE("step fit: the kinds of point are the steps they stand for",
          "[model][scheduler][calibration]") {
  step_factors f = some_factors();
  step_measurement m;
  m.gpu = "x";
  m.profile = llama8b("x", 3350);
  roofline_profile r = m.profile;
  r.gpu = with_factors(m, f);
  CHECK(r.gpu.compute_efficiency == 0.6);
  CHECK(r.gpu.step_overhead_us == 300);
  CHECK(r.gpu.layer_overhead_us == 60);
  m.kind = measured_kind::decode;
  m.batch = 16;
  m.context = 2000;
  batch_shape d;
  for (int i = 0; i < 16; ++i)
    d.add_decode(2000);
  CHECK(predict_seconds(m, f) == Approx((300e3 + roofline_of(r, d).work_ns()) / 1e9));
  m.kind = measured_kind::prefill_stream;
  m.prompts = 100;
  m.prompt = 32000;
  batch_shape p;
  p.add_prefill(0, 32000);
  CHECK(predict_seconds(m, f) == Approx(100 * (300e3 + roofline_of(r, p).work_ns()) / 1e9));
  m.measured_s = predict_seconds(m, f) / 1.25;
  CHECK(relative_error(m, f) == Approx(0.25));
  // A first token a decode step samples: the prefill of all but the prompt's last token, then
  // one decode step at the prompt's length (LMDeploy's TurboMind).
  m.kind = measured_kind::prefill;
  m.batch = 1;
  m.prompt = 128;
  m.first_token = first_token_step::decode;
  batch_shape head, last;
  head.add_prefill(0, 127);
  last.add_decode(128);
  CHECK(predict_seconds(m, f) ==
        Approx((600e3 + roofline_of(r, head).work_ns() + roofline_of(r, last).work_ns()) / 1e9));
  // A GPU the factors lack takes the mean of those they have.
  m.gpu = "z";
  CHECK(with_factors(m, f).compute_efficiency == Approx(0.525));
}

TEST_CASE("step fit: the fit recovers the factors its points were made with",
          "[model][scheduler][calibration]") {
  step_factors truth = some_factors();
  std::vector<step_measurement> points;
  for (const char* gpu : {"x", "y"})
    for (uint32_t tp : {1u, 2u})
      for (uint64_t batch : {1, 8, 64, 256}) {
        step_measurement m;
        m.gpu = gpu;
        m.profile = llama8b(gpu, gpu[0] == 'x' ? 3350 : 2039);
        m.profile.parallel.tp = tp;
        m.kind = measured_kind::decode;
        m.batch = batch;
        m.context = 512 * batch % 7000 + 100;
        points.push_back(m);
        m.kind = measured_kind::prefill;
        m.batch = 1;
        m.prompt = 16 * batch + 100;
        points.push_back(m);
      }
  // Deeper models tell the layer's fixed time from the step's.
  for (uint64_t batch : {1, 32}) {
    step_measurement m = points[0];
    m.profile.model.layers = 80;
    m.profile.model.hidden_size = 8192;
    m.profile.model.attention_heads = 64;
    m.profile.model.params = m.profile.model.active_params = 70.6e9;
    m.profile.parallel.tp = 4;
    m.batch = batch;
    points.push_back(m);
  }
  // An MoE point keeps the MoE layer overhead determined.
  step_measurement moe = points[0];
  moe.profile.model.experts = 8;
  moe.profile.model.active_experts = 2;
  moe.profile.model.params = 46.7e9;
  moe.profile.model.active_params = 12.9e9;
  points.push_back(moe);
  std::vector<const step_measurement*> ptrs;
  for (step_measurement& m : points) {
    m.measured_s = predict_seconds(m, truth);
    ptrs.push_back(&m);
  }
  step_factors fit = fit_step_factors(ptrs);
  std::vector<double> errors;
  for (const step_measurement* m : ptrs)
    errors.push_back(relative_error(*m, fit));
  CHECK(rms(errors) < 1e-4);
  CHECK(fit.gpus.at("x").compute_efficiency == Approx(0.6).epsilon(0.02));
  CHECK(fit.gpus.at("y").memory_efficiency == Approx(0.8).epsilon(0.02));
  CHECK(fit.layer_overhead_us == Approx(60).epsilon(0.05));
}
