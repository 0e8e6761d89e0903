#pragma once

// The roofline step model (compute.model=roofline, docs/design.md "Compute"): a step takes the
// longer of its FLOPs over the GPU's peak and its bytes over the HBM bandwidth, each scaled by
// the GPU's fitted efficiency, plus the collectives of tensor and pipeline parallelism:
//
//   compute = (2 * active_params * T + attention_flops_per_pair * pairs) / tp
//             / (peak_flops * compute_efficiency)
//   memory  = (weights read / tp + kv_bytes_split * (prefill context + decode context + T))
//             / (hbm_bandwidth * memory_efficiency)
//   collectives = layers * 2 all-reduces of T * hidden * 2 bytes over NVLink (tp > 1, ring:
//             2 (tp - 1) / tp of it per rank, plus compute.allreduce_latency_us each)
//             + (pp - 1) hand-offs of the same activations between stages
//   step = max(compute, memory) + collectives
//
// T = tokens of the step (prefill and decode), pairs = sum of token x context-token pairs of
// attention. Stages of a pipeline run one after another within a step (no micro-batches), so PP
// divides memory, not the step's time.

#include "core/gpu_spec.hpp"
#include "core/model_spec.hpp"

namespace kvtier {

struct batch_shape;

struct roofline_profile {
  model_spec model;
  gpu_spec gpu;
  parallelism parallel;
  double allreduce_latency_ns = 0;
};

/// A step's time in its parts, nanoseconds, without the fixed per-step overhead.
struct roofline_parts {
  double compute_ns = 0;
  double memory_ns = 0;
  double collective_ns = 0;
  double work_ns() const;
  bool compute_bound() const { return compute_ns >= memory_ns; }
};

roofline_parts roofline_of(const roofline_profile& r, const batch_shape& b);

}  // namespace kvtier
