#pragma once

// Marks the few functions that the CUDA kernels and the CPU code share (slice arithmetic, the
// verification pattern's words), so that both sides compute them from one definition. This
// includes no CUDA header: nvcc defines __CUDACC__ itself.

#if defined(__CUDACC__)
#define KVTIER_HOST_DEVICE __host__ __device__
#else
#define KVTIER_HOST_DEVICE
#endif
