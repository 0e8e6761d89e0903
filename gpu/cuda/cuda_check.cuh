#pragma once

// Every CUDA call of the backend goes through KVTIER_CUDA_CHECK, and every kernel launch is
// followed by KVTIER_CUDA_CHECK_LAUNCH: a failure becomes a gpu_error naming the call, the place
// it was made and CUDA's description, e.g.
//   "cudaMemcpyAsync(...) failed at gpu/cuda/x.cu:12: invalid argument (cudaErrorInvalidValue)"

#include <cuda_runtime.h>

#include <string>

#include "gpu/gpu_error.hpp"

namespace kvtier::gpu::detail {

/// "invalid argument (cudaErrorInvalidValue)".
std::string cuda_error_text(cudaError_t err);

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);

/// Raises the error of the last kernel launch, if any.
void check_launch(const char* kernel, const char* file, int line);

}  // namespace kvtier::gpu::detail

#define KVTIER_CUDA_CHECK(call)                                                      \
  do {                                                                               \
    cudaError_t kvtier_cuda_err_ = (call);                                           \
    if (kvtier_cuda_err_ != cudaSuccess)                                             \
      ::kvtier::gpu::detail::throw_cuda_error(kvtier_cuda_err_, #call, __FILE__, __LINE__); \
  } while (false)

#define KVTIER_CUDA_CHECK_LAUNCH(kernel) \
  ::kvtier::gpu::detail::check_launch(#kernel, __FILE__, __LINE__)
