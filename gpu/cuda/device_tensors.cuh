#pragma once

// Where the cache's device tensors live (kv_cache_config::memory): one arena it owns, one
// exportable allocation per layer it owns, or another process's layers opened through CUDA IPC.
// Everything else in the backend sees the tensors through layer(l): K at layer(l), V at
// layer(l) + tensor_bytes, each [device_blocks][chunk].

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "gpu/kv_cache.hpp"

namespace kvtier::gpu::detail {

class device_tensors {
 public:
  virtual ~device_tensors() = default;
  /// K of `layer`; V follows it at tensor_bytes.
  uint8_t* layer(uint32_t l) const { return layers_[l]; }
  /// The address of an offset in the arena layout (kv_layout::device_offset and its runs within
  /// one tensor).
  uint8_t* at(uint64_t arena_offset) const;
  /// Bytes that a bulk copy may cover from layer(0) on: contiguous in this memory.
  virtual uint64_t contiguous_bytes() const = 0;
  /// Handles for another process (own_exported only; throws otherwise).
  virtual std::vector<layer_tensor_handle> export_layers() const;

  /// Allocates or opens the tensors that `config` names, shaped by `layout`.
  static std::unique_ptr<device_tensors> make(const kv_cache_config& config,
                                              const kv_layout& layout);

 protected:
  explicit device_tensors(const kv_layout& layout) : tensor_bytes_(layout.tensor_bytes()) {}
  uint64_t tensor_bytes_;
  std::vector<uint8_t*> layers_;
};

}  // namespace kvtier::gpu::detail
