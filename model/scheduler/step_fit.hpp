#pragma once

// The roofline step model held to published measurements (docs/models.md, "Calibration"):
// each measurement of measurements/step_times.json becomes the steps the model would run for
// it (one prefill, one decode step, a static batch's prefill and decode steps, a stream of
// prefills), and the factors the model cannot know from data sheets (per GPU: compute and
// memory efficiency; shared: attention's rate, the overlap of compute and memory time, the
// fixed cost of a step, of a layer, of an MoE layer and of each expert it runs) are fitted by least squares on the
// relative errors. `kvtier model-fit` runs it; this file is the arithmetic, CAF-free.

#include <map>
#include <string>
#include <vector>

#include "model/scheduler/roofline.hpp"

namespace kvtier {

enum class measured_kind {
  prefill,         ///< one step prefilling `batch` prompts of `prompt` tokens, empty cache
  decode,          ///< one step of `batch` sequences at `context` tokens each
  generate,        ///< a static batch: one prefill step, then output - 1 decode steps
  prefill_stream,  ///< `prompts` prompts of `prompt` tokens prefilled one after another
};

/// Which step of an engine gives a request its first token.
enum class first_token_step {
  prefill,  ///< the prefill step samples it (vLLM, SGLang, TensorRT-LLM)
  /// the prefill takes all of the prompt but its last token, which a decode step then takes and
  /// samples the first token from (LMDeploy's TurboMind: docs/models.md, "Calibration")
  decode,
};

/// One measured point, resolved: the deployment the step model computes and the time measured.
struct step_measurement {
  std::string id;
  std::string source;
  std::string gpu;  ///< preset name: the fitted factors are per GPU
  roofline_profile profile;  ///< model, GPU data sheet, parallelism, KV reads; factors not set
  measured_kind kind = measured_kind::prefill;
  first_token_step first_token = first_token_step::prefill;
  uint64_t batch = 1;
  uint64_t prompt = 0;
  uint64_t output = 0;
  uint64_t context = 0;
  uint64_t prompts = 1;
  double measured_s = 0;  ///< the whole measured time (run, step or stream), seconds
};

/// The fitted factors of one GPU.
struct gpu_factors {
  double compute_efficiency = 0.5;
  double memory_efficiency = 0.8;
};

/// Every fitted factor: per GPU, and those all GPUs share.
struct step_factors {
  std::map<std::string, gpu_factors> gpus;
  double step_overhead_us = 500;
  double attention_efficiency = 0.5;
  double overlap = 0.5;
  double layer_overhead_us = 50;
  double moe_layer_overhead_us = 100;
  double moe_expert_overhead_us = 10;
};

/// The GPU of `m` with the factors of `f` in place (a GPU `f` lacks takes the mean of those it
/// has: a GPU no training point ran on).
gpu_spec with_factors(const step_measurement& m, const step_factors& f);
/// The model's time for `m`, seconds.
double predict_seconds(const step_measurement& m, const step_factors& f);
/// predicted / measured - 1.
double relative_error(const step_measurement& m, const step_factors& f);

/// Least squares on the relative errors of `points` (Levenberg-Marquardt from a few fixed
/// starting points, each factor kept in its range by its parametrisation); deterministic.
step_factors fit_step_factors(const std::vector<const step_measurement*>& points);

/// Root mean square of `errors`.
double rms(const std::vector<double>& errors);

}  // namespace kvtier
