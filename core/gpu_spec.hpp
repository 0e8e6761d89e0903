#pragma once

// What a GPU can do, in its data sheet's figures (docs/models.md), and the efficiency factors
// that turn peaks into what an engine reaches, fitted once per GPU against published
// measurements (docs/models.md, "Check against measurements"). Bandwidths are per direction.

#include <string>

namespace kvtier {

struct gpu_spec {
  std::string name;
  double bf16_tflops = 0;       ///< dense, no sparsity
  double fp8_tflops = 0;        ///< dense; 0 where the GPU has no FP8 units (bf16's rate then)
  double hbm_gbps = 0;          ///< GB/s
  double hbm_gib = 0;
  double host_link_gbps = 0;    ///< PCIe or C2C to host memory, GB/s per direction
  double nvlink_gbps = 0;       ///< GPU-to-GPU within a node, GB/s per direction
  double rdma_gbps = 0;         ///< GPU-to-GPU across nodes, GB/s per direction
  double compute_efficiency = 1;  ///< share of the peak FLOPs a step reaches
  double memory_efficiency = 1;   ///< share of the HBM bandwidth a step reaches
  double step_overhead_us = 0;    ///< fixed time of every step (launch, sampling, scheduling)

  /// Dense FLOPs per nanosecond at the weights' dtype.
  double flops_per_ns(unsigned weight_dtype_bytes) const {
    double tflops = weight_dtype_bytes == 1 && fp8_tflops > 0 ? fp8_tflops : bf16_tflops;
    return tflops * 1e3;
  }
};

}  // namespace kvtier
