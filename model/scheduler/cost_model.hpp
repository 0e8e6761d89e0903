#pragma once

// How long one engine step takes on the GPU, from the shape of its batch:
//
//   step_ns = overhead
//           + prefill_token_ns   * P                      (dense layers, per prefill token)
//           + prefill_attention_ns * sum_i p_i * (c_i + (p_i + 1) / 2)
//                                                          (attention: each new token attends to
//                                                           its context; c_i = tokens already
//                                                           cached or computed, p_i = new tokens)
//           + decode_token_ns    * D                      (dense layers, per decode sequence)
//           + decode_context_ns  * sum_j ctx_j            (reading each sequence's KV)
//
// The overhead is paid once per step, before the first layer (scheduling, sampling, launch); the
// rest is spread evenly over the layers, so layer i of a step can start as soon as its inputs
// are in device memory (layer_pipeline.hpp). Parameters are in configs/ (compute.*); the default
// profile approximates a Llama-3-8B-class model in bf16 on one H200.
//
// That is compute.model=linear, the default. compute.model=roofline (roofline.hpp) derives the
// work of a step from the model's and the GPU's figures instead, and its fixed time from
// gpu.step_overhead_us; the layers share it the same way.

#include <cstdint>

#include "model/scheduler/roofline.hpp"

namespace kvtier {

enum class compute_model { linear, roofline };

struct compute_profile {
  compute_model model = compute_model::linear;
  roofline_profile roofline;  ///< compute.model=roofline
  double step_overhead_ns = 0;
  double prefill_token_ns = 0;
  double prefill_attention_ns = 0;
  double decode_token_ns = 0;
  double decode_context_ns = 0;
  uint32_t layers = 1;
  /// Each layer of a step that follows a swap-in waits this long on its copy event, even when
  /// its data is in place (links.h2d_layer_wait_us; layer_pipeline.hpp).
  int64_t layer_wait_ns = 0;
  /// Host time per block of the step's swap-in before its compute can follow the copy
  /// (links.h2d_submit_us_per_block; layer_pipeline.hpp).
  int64_t swap_in_submit_ns_per_block = 0;
};

/// Accumulates the work of one step.
struct batch_shape {
  uint64_t prefill_tokens = 0;
  double attention_pairs = 0;  ///< sum over prefill chunks of p * (c + (p + 1) / 2)
  uint32_t decode_seqs = 0;
  uint64_t decode_context = 0;
  uint64_t prefill_context = 0;  ///< sum over prefill chunks of c: cached KV their attention reads

  void add_prefill(uint64_t context, uint64_t tokens);
  void add_decode(uint64_t context);
  bool empty() const { return prefill_tokens == 0 && decode_seqs == 0; }
};

struct step_cost {
  int64_t overhead_ns = 0;
  int64_t total_work_ns = 0;  ///< all layers
  int64_t layer_ns = 0;       ///< every layer but the last
  int64_t last_layer_ns = 0;  ///< takes the rounding remainder
  int64_t total_ns() const;
};

step_cost cost_of(const compute_profile& p, const batch_shape& b);

}  // namespace kvtier
