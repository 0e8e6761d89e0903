#include "runtime/config/gpu_keys.hpp"

namespace kvtier {

std::vector<option_spec> gpu_key_specs() {
  return {
    {keys::gpu::name, 0, 0, {}, false, "GPU name, for reports"},
    {keys::gpu::bf16_tflops, 1e-3, 1e6, {}, false, "peak dense BF16 TFLOPS"},
    {keys::gpu::fp8_tflops, 0, 1e6, {}, false,
     "peak dense FP8 TFLOPS (0: no FP8 units, FP8 weights run at the BF16 rate)"},
    {keys::gpu::hbm_gbps, 1e-3, 1e6, {}, false, "HBM bandwidth, GB/s"},
    {keys::gpu::hbm_gib, 0, 1e6, {}, false, "HBM size, GiB"},
    {keys::gpu::host_link_gbps, 0, 1e6, {}, false,
     "PCIe or C2C bandwidth to host memory, GB/s per direction"},
    {keys::gpu::nvlink_gbps, 1e-3, 1e6, {}, false,
     "NVLink (or Infinity Fabric) bandwidth to a peer GPU, GB/s per direction"},
    {keys::gpu::rdma_gbps, 0, 1e6, {}, false, "RDMA bandwidth across nodes, GB/s per direction"},
    {keys::gpu::compute_efficiency, 1e-3, 1, {}, false,
     "share of the peak FLOPs a step reaches (fitted, docs/models.md)"},
    {keys::gpu::memory_efficiency, 1e-3, 1, {}, false,
     "share of the HBM bandwidth a step reaches (fitted, docs/models.md)"},
    {keys::gpu::step_overhead_us, 0, 1e9, {}, false,
     "fixed time of every step under compute.model=roofline, microseconds"},
  };
}

}  // namespace kvtier
