#pragma once

// What a GPU can do, in its data sheet's figures (docs/models.md), what its links reach in
// published NCCL measurements, and the factors that turn peaks into what an engine reaches,
// fitted against published step-time measurements (kvtier model-fit, docs/models.md).
// Bandwidths are per direction.

#include <string>

namespace kvtier {

struct gpu_spec {
  std::string name;
  double bf16_tflops = 0;       ///< dense, no sparsity
  double fp8_tflops = 0;        ///< dense; 0 where the GPU has no FP8 units
  double int8_tops = 0;         ///< dense; 0 where it has no INT8 tensor cores
  double fp4_tflops = 0;        ///< dense; 0 where it has no FP4 units
  double hbm_gbps = 0;          ///< GB/s
  double hbm_gib = 0;
  double host_link_gbps = 0;    ///< PCIe or C2C to host memory, GB/s per direction
  double nvlink_gbps = 0;       ///< GPU-to-GPU within a node, data sheet, GB/s per direction
  double rdma_gbps = 0;         ///< GPU-to-GPU across nodes, GB/s per direction
  double collective_latency_us = 0;  ///< one all-reduce or hand-off of a few hundred bytes
  double collective_mid_gbps = 0;    ///< ring bytes per ns of messages up to 1 MiB, GB/s
  double collective_gbps = 0;   ///< beyond 1 MiB: what NCCL moves per link (bus bandwidth)
  double compute_efficiency = 1;  ///< share of the peak FLOPs the matrix multiplies reach
  double attention_efficiency = 1;  ///< attention's rate as a share of the matrix multiplies'
  double memory_efficiency = 1;   ///< share of the HBM bandwidth a step reaches
  double overlap = 1;             ///< how far compute and memory time overlap: 1 max, 0 sum
  double step_overhead_us = 0;    ///< fixed time of every step (scheduling, sampling)
  double layer_overhead_us = 0;   ///< fixed time of every layer of a step (its kernels' tails)
  double moe_layer_overhead_us = 0;  ///< more per MoE layer (routing, grouped GEMM set-up)
  /// more per MoE layer for each routed expert the step's tokens go to (each its own GEMM)
  double moe_expert_overhead_us = 0;

  /// Dense FLOPs per nanosecond of matrix multiplies on weights of `weight_dtype`: that dtype's
  /// units where the GPU has them; else the weights are dequantized to BF16 (W8A16, W4A16).
  /// int4 is weight-only on every GPU (AWQ/GPTQ kernels multiply in 16 bits).
  double flops_per_ns(const std::string& weight_dtype) const {
    double tflops = bf16_tflops;
    if (weight_dtype == "fp8" && fp8_tflops > 0)
      tflops = fp8_tflops;
    else if (weight_dtype == "int8" && int8_tops > 0)
      tflops = int8_tops;
    else if (weight_dtype == "fp4" && fp4_tflops > 0)
      tflops = fp4_tflops;
    return tflops * 1e3;
  }
};

}  // namespace kvtier
