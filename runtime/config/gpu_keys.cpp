#include "runtime/config/gpu_keys.hpp"

namespace kvtier {

std::vector<option_spec> gpu_key_specs() {
  return {
    {keys::gpu::name, 0, 0, {}, false, "GPU name, for reports"},
    {keys::gpu::bf16_tflops, 1e-3, 1e6, {}, false, "peak dense BF16 TFLOPS"},
    {keys::gpu::fp8_tflops, 0, 1e6, {}, false,
     "peak dense FP8 TFLOPS (0: no FP8 units, FP8 weights run at the BF16 rate)"},
    {keys::gpu::int8_tops, 0, 1e6, {}, false,
     "peak dense INT8 TOPS (0: no INT8 tensor cores, INT8 weights run at the BF16 rate)"},
    {keys::gpu::fp4_tflops, 0, 1e6, {}, false,
     "peak dense FP4 TFLOPS (0: no FP4 units, FP4 weights run at the BF16 rate)"},
    {keys::gpu::hbm_gbps, 1e-3, 1e6, {}, false, "HBM bandwidth, GB/s"},
    {keys::gpu::hbm_gib, 0, 1e6, {}, false, "HBM size, GiB"},
    {keys::gpu::host_link_gbps, 0, 1e6, {}, false,
     "PCIe or C2C bandwidth to host memory, GB/s per direction"},
    {keys::gpu::nvlink_gbps, 1e-3, 1e6, {}, false,
     "NVLink (or Infinity Fabric) bandwidth to a peer GPU, GB/s per direction"},
    {keys::gpu::rdma_gbps, 0, 1e6, {}, false, "RDMA bandwidth across nodes, GB/s per direction"},
    {keys::gpu::collective_latency_us, 0, 1e6, {}, false,
     "time of one all-reduce or pipeline hand-off of a few hundred bytes, microseconds"},
    {keys::gpu::collective_mid_gbps, 1e-3, 1e6, {}, false,
     "rate of an all-reduce's ring bytes for messages up to 1 MiB, GB/s (measured)"},
    {keys::gpu::collective_gbps, 1e-3, 1e6, {}, false,
     "beyond 1 MiB: the bandwidth NCCL reaches between two GPUs of a node (bus bandwidth), "
     "GB/s"},
    {keys::gpu::compute_efficiency, 1e-3, 1, {}, false,
     "share of the peak FLOPs the matrix multiplies reach (fitted, docs/models.md)"},
    {keys::gpu::attention_efficiency, 1e-3, 1, {}, false,
     "attention's FLOP rate as a share of the matrix multiplies' (fitted, docs/models.md)"},
    {keys::gpu::memory_efficiency, 1e-3, 1, {}, false,
     "share of the HBM bandwidth a step reaches (fitted, docs/models.md)"},
    {keys::gpu::overlap, 0, 1, {}, false,
     "how far a step's compute and memory time overlap: 1 the longer of the two (roofline), "
     "0 their sum (fitted, docs/models.md)"},
    {keys::gpu::step_overhead_us, 0, 1e9, {}, false,
     "fixed time of every step under compute.model=roofline, microseconds"},
    {keys::gpu::layer_overhead_us, 0, 1e6, {}, false,
     "fixed time of every layer of a step under compute.model=roofline, microseconds"},
    {keys::gpu::moe_layer_overhead_us, 0, 1e6, {}, false,
     "more fixed time of every layer of an MoE model (routing, expert kernels), microseconds"},
    {keys::gpu::moe_expert_overhead_us, 0, 1e6, {}, false,
     "more fixed time of an MoE layer per routed expert a step's tokens go to, microseconds"},
  };
}

}  // namespace kvtier
