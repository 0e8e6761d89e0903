#pragma once

// The gpu.* config keys: the GPU of every rank, in its data sheet's figures and published NCCL
// measurements, and the factors the roofline step model (model/scheduler/roofline.hpp) applies
// to them, fitted by kvtier model-fit. Read by
// compute_config.cpp; set together by preset.gpu (docs/models.md).
// Each key is a named constant, so a misspelled key is a compile error; its type, range and
// meaning are its row in gpu_keys.cpp.

#include <vector>

#include "runtime/config/option_spec.hpp"

namespace kvtier {

namespace keys::gpu {

inline constexpr text_key name{"gpu.name"};
inline constexpr number_key bf16_tflops{"gpu.bf16_tflops"};
inline constexpr number_key fp8_tflops{"gpu.fp8_tflops"};
inline constexpr number_key int8_tops{"gpu.int8_tops"};
inline constexpr number_key fp4_tflops{"gpu.fp4_tflops"};
inline constexpr number_key hbm_gbps{"gpu.hbm_gbps"};
inline constexpr number_key hbm_gib{"gpu.hbm_gib"};
inline constexpr number_key host_link_gbps{"gpu.host_link_gbps"};
inline constexpr number_key nvlink_gbps{"gpu.nvlink_gbps"};
inline constexpr number_key rdma_gbps{"gpu.rdma_gbps"};
inline constexpr number_key collective_latency_us{"gpu.collective_latency_us"};
inline constexpr number_key collective_mid_gbps{"gpu.collective_mid_gbps"};
inline constexpr number_key collective_gbps{"gpu.collective_gbps"};
inline constexpr number_key compute_efficiency{"gpu.compute_efficiency"};
inline constexpr number_key attention_efficiency{"gpu.attention_efficiency"};
inline constexpr number_key memory_efficiency{"gpu.memory_efficiency"};
inline constexpr number_key overlap{"gpu.overlap"};
inline constexpr number_key step_overhead_us{"gpu.step_overhead_us"};
inline constexpr number_key layer_overhead_us{"gpu.layer_overhead_us"};
inline constexpr number_key moe_layer_overhead_us{"gpu.moe_layer_overhead_us"};
inline constexpr number_key moe_expert_overhead_us{"gpu.moe_expert_overhead_us"};

}  // namespace keys::gpu

/// The gpu.* rows of the options table, in the order `kvtier config` lists them.
std::vector<option_spec> gpu_key_specs();

}  // namespace kvtier
