#pragma once

// Which CUDA device the backend would run on, asked without side effects. The query never
// throws: on a machine without a GPU or driver it reports why (CUDA's own words, or "built
// without CUDA"), so callers and tests can say "skipped" instead of failing.

#include <cstdint>
#include <string>

namespace kvtier::gpu {

struct device_info {
  bool available = false;
  std::string reason;  ///< why no device can be used; empty when available
  int ordinal = 0;
  std::string name;
  std::string pci_bus_id;
  int compute_major = 0;
  int compute_minor = 0;
  int sm_count = 0;
  uint64_t memory_bytes = 0;
  bool maps_host_memory = false;
  int driver_version = 0;   ///< CUDA version the driver supports, e.g. 13000
  int runtime_version = 0;  ///< CUDA runtime linked in, e.g. 13000
};

/// Describes device `ordinal`; never throws.
device_info query_device(int ordinal = 0) noexcept;

/// Whether this build has the CUDA backend at all (gpu/no_cuda.cpp answers false).
bool cuda_built() noexcept;

/// One line: "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB, PCI 0000:..., driver 13.0, runtime 13.0)",
/// or "no CUDA device: <reason>".
std::string describe(const device_info& info);

}  // namespace kvtier::gpu
