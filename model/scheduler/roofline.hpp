#pragma once

// The roofline step model (compute.model=roofline, docs/models.md "The step model"): a step
// takes its FLOPs over the GPU's peaks and its bytes over the HBM bandwidth, each scaled by a
// fitted efficiency and combined by a fitted overlap, plus fixed costs per layer and the
// collectives of tensor and pipeline parallelism:
//
//   compute = 2 * active_params * T / tp / (peak(weight dtype) * compute_efficiency)
//           + attention FLOPs / tp / (peak(bf16) * compute_efficiency * attention_efficiency)
//   memory  = (weights read / tp + kv_split * (cached context read + T
//              + decode context * KV reads per KV head)) / (hbm_bandwidth * memory_efficiency)
//   layers  = layers * (layer_overhead + MoE ? moe_layer_overhead
//             + experts the step's tokens go to * moe_expert_overhead : 0)
//   collectives = layers * 2 all-reduces of T * hidden * 2 bytes (tp > 1, ring: 2 (tp - 1) / tp
//           of it per rank, its first MiB at collective_mid_gbps and the rest at
//           collective_gbps, plus collective_latency each)
//   work = max(compute, memory) + (1 - overlap) * min(compute, memory) + layers + collectives
//
// T = tokens of the step (prefill and decode). Pipeline stages run one after another, adding
// (pp - 1) hand-offs of the activations; with parallel.pp_microbatches = m > 1 the batch is cut
// into m micro-batches that overlap across the stages: (m + pp - 1) stage slots of one
// micro-batch's work, plus the hand-offs of one micro-batch.

#include "core/gpu_spec.hpp"
#include "core/model_spec.hpp"

namespace kvtier {

struct batch_shape;

/// How a decode step's attention kernel reads the KV of a grouped-query model.
enum class decode_kv_reads {
  grouped,         ///< each KV head once for its group of query heads (FlashAttention, XQA)
  per_query_head,  ///< once per query head (TensorRT-LLM's generation kernel before XQA, v0.8)
};

struct roofline_profile {
  model_spec model;
  gpu_spec gpu;
  parallelism parallel;
  decode_kv_reads kv_reads = decode_kv_reads::grouped;
};

/// A step's time in its parts, nanoseconds, without the fixed per-step overhead. With pipeline
/// micro-batches the parts are one micro-batch's, whole model; work_ns() assembles the step.
struct roofline_parts {
  double compute_ns = 0;    ///< matrix multiplies and attention
  double attention_ns = 0;  ///< of compute_ns, attention
  double memory_ns = 0;
  double layer_ns = 0;      ///< fixed costs of the layers
  double collective_ns = 0;  ///< TP all-reduces
  double handoff_ns = 0;     ///< one PP hand-off
  double overlap = 1;
  uint32_t stages = 1;
  uint32_t microbatches = 1;

  /// The whole model's work for one micro-batch, stages one after another, no hand-offs.
  double serial_ns() const;
  double work_ns() const;
  bool compute_bound() const { return compute_ns >= memory_ns; }
};

roofline_parts roofline_of(const roofline_profile& r, const batch_shape& b);

/// One all-reduce of `bytes` over `tp` ranks: latency plus the ring's 2 (tp - 1) / tp of it,
/// its first MiB at the measured mid-size rate and the rest at the bus bandwidth.
double allreduce_ns(const gpu_spec& g, uint32_t tp, double bytes);
/// One pipeline hand-off of `bytes` to the next stage, the same way.
double handoff_ns(const gpu_spec& g, double bytes);

}  // namespace kvtier
