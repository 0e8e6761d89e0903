#include "gpu/device_info.hpp"

#include <cuda_runtime.h>

#include "gpu/cuda/cuda_check.cuh"

namespace kvtier::gpu {

bool cuda_built() noexcept {
  return true;
}

device_info query_device(int ordinal) noexcept {
  device_info info;
  info.ordinal = ordinal;
  try {
    int count = 0;
    cudaError_t err = cudaGetDeviceCount(&count);
    if (err != cudaSuccess) {
      cudaGetLastError();  // clear it: the failed query must not poison later calls
      info.reason = detail::cuda_error_text(err);
      return info;
    }
    if (ordinal < 0 || ordinal >= count) {
      info.reason = "device " + std::to_string(ordinal) + " not present (" + std::to_string(count)
                    + " CUDA devices)";
      return info;
    }
    cudaDeviceProp prop;
    err = cudaGetDeviceProperties(&prop, ordinal);
    if (err != cudaSuccess) {
      cudaGetLastError();
      info.reason = detail::cuda_error_text(err);
      return info;
    }
    char bus[32] = {};
    if (cudaDeviceGetPCIBusId(bus, sizeof bus, ordinal) != cudaSuccess)
      cudaGetLastError();
    cudaDriverGetVersion(&info.driver_version);
    cudaRuntimeGetVersion(&info.runtime_version);
    info.name = prop.name;
    info.pci_bus_id = bus;
    info.compute_major = prop.major;
    info.compute_minor = prop.minor;
    info.sm_count = prop.multiProcessorCount;
    info.memory_bytes = prop.totalGlobalMem;
    info.maps_host_memory = prop.canMapHostMemory != 0;
    info.available = true;
    if (!info.maps_host_memory) {
      info.available = false;
      info.reason = info.name + " cannot map host memory";
    }
  } catch (const std::exception& e) {
    info.available = false;
    info.reason = e.what();
  }
  return info;
}

}  // namespace kvtier::gpu
