#pragma once

// Owners of CUDA resources. Destructors cannot report errors, so they ignore them: by then the
// backend either finished its work or is unwinding from an error already raised.

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "gpu/cuda/cuda_check.cuh"
#include "gpu/startup_progress.hpp"

namespace kvtier::gpu::detail {

/// A non-blocking stream: it never synchronizes with the legacy default stream.
class cuda_stream {
 public:
  cuda_stream() { KVTIER_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~cuda_stream() { cudaStreamDestroy(s_); }
  cuda_stream(const cuda_stream&) = delete;
  cuda_stream& operator=(const cuda_stream&) = delete;
  cudaStream_t get() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

class device_buffer {
 public:
  explicit device_buffer(uint64_t bytes) {
    if (bytes > 0)
      KVTIER_CUDA_CHECK(cudaMalloc(&p_, bytes));
  }
  ~device_buffer() { cudaFree(p_); }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  uint8_t* get() const { return static_cast<uint8_t*>(p_); }

 private:
  void* p_ = nullptr;
};

/// Page-locked host memory, mapped into the device's address space (for the zero-copy kernel)
/// and portable (usable from any context in the process).
class pinned_buffer {
 public:
  /// With `touch_threads`, the pages are mapped and first touched by that many threads, then
  /// registered (startup_progress.hpp says why); else one cudaHostAlloc.
  explicit pinned_buffer(uint64_t bytes, unsigned touch_threads = 0) : bytes_(bytes) {
    if (bytes == 0)
      return;
    if (touch_threads == 0) {
      KVTIER_CUDA_CHECK(cudaHostAlloc(&p_, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
    } else {
      mapped_ = map_touched_pages(bytes, touch_threads);
      cudaError_t e =
        cudaHostRegister(mapped_, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
      if (e != cudaSuccess)
        unmap_pages(mapped_, bytes);
      KVTIER_CUDA_CHECK(e);
      p_ = mapped_;
    }
    KVTIER_CUDA_CHECK(cudaHostGetDevicePointer(&device_view_, p_, 0));
  }
  ~pinned_buffer() {
    if (mapped_ == nullptr) {
      cudaFreeHost(p_);
      return;
    }
    cudaHostUnregister(mapped_);
    unmap_pages(mapped_, bytes_);
  }
  pinned_buffer(const pinned_buffer&) = delete;
  pinned_buffer& operator=(const pinned_buffer&) = delete;
  uint8_t* get() const { return static_cast<uint8_t*>(p_); }
  /// The same memory as the device addresses it.
  uint8_t* device_view() const { return static_cast<uint8_t*>(device_view_); }

 private:
  void* p_ = nullptr;
  void* device_view_ = nullptr;
  std::byte* mapped_ = nullptr;
  uint64_t bytes_ = 0;
};

/// Recycles timing events: an op takes a few dozen, and creating them per op would cost more
/// than the small transfers they time.
class event_pool {
 public:
  event_pool() = default;
  ~event_pool() {
    for (cudaEvent_t e : all_)
      cudaEventDestroy(e);
  }
  event_pool(const event_pool&) = delete;
  event_pool& operator=(const event_pool&) = delete;

  cudaEvent_t take() {
    if (free_.empty()) {
      cudaEvent_t e;
      // Blocking sync: a host thread waiting for a long transfer sleeps instead of spinning.
      KVTIER_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventBlockingSync));
      all_.push_back(e);
      return e;
    }
    cudaEvent_t e = free_.back();
    free_.pop_back();
    return e;
  }
  void give_back(cudaEvent_t e) { free_.push_back(e); }

  /// An event only for ordering streams, never timed (cheaper to record and wait on); it stays
  /// with its user for the pool's life.
  cudaEvent_t take_untimed() {
    cudaEvent_t e;
    KVTIER_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    all_.push_back(e);
    return e;
  }

 private:
  std::vector<cudaEvent_t> all_;
  std::vector<cudaEvent_t> free_;
};

}  // namespace kvtier::gpu::detail
