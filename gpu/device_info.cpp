#include "gpu/device_info.hpp"

#include <cstdio>

namespace kvtier::gpu {

namespace {

std::string cuda_version(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

}  // namespace

std::string describe(const device_info& info) {
  if (!info.available)
    return "no CUDA device: " + info.reason;
  char gib[32];
  std::snprintf(gib, sizeof gib, "%.1f GiB", static_cast<double>(info.memory_bytes) / (1 << 30));
  return info.name + " (sm_" + std::to_string(info.compute_major)
         + std::to_string(info.compute_minor) + ", " + std::to_string(info.sm_count) + " SMs, "
         + gib + ", PCI " + info.pci_bus_id + ", driver " + cuda_version(info.driver_version)
         + ", runtime " + cuda_version(info.runtime_version) + ")";
}

}  // namespace kvtier::gpu
