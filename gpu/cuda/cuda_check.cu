#include "gpu/cuda/cuda_check.cuh"

#include <cstring>

namespace kvtier::gpu::detail {

namespace {

/// The path from the project's gpu/ folder on: build machines' folders stay out of messages.
const char* project_path(const char* file) {
  const char* from = file;
  for (const char* p = std::strstr(file, "/gpu/"); p != nullptr; p = std::strstr(p + 1, "/gpu/"))
    from = p + 1;
  return from;
}

}  // namespace

std::string cuda_error_text(cudaError_t err) {
  return std::string(cudaGetErrorString(err)) + " (" + cudaGetErrorName(err) + ")";
}

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  // The error is reported here; left as the thread's last error, it would resurface at the next
  // launch check (cudaGetLastError) as if that launch had failed.
  cudaGetLastError();
  throw gpu_error(std::string(call) + " failed at " + project_path(file) + ":"
                  + std::to_string(line) + ": " + cuda_error_text(err));
}

void check_launch(const char* kernel, const char* file, int line) {
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess)
    throw_cuda_error(err, (std::string("launch of ") + kernel).c_str(), file, line);
}

}  // namespace kvtier::gpu::detail
