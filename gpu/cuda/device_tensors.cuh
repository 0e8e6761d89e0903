#pragma once

// Where the cache's device tensors live (kv_cache_config::memory): one arena it owns, one
// exportable allocation per layer it owns, or another process's layers opened through CUDA IPC.
// Everything else in the backend sees the tensors through layer(l) and the layout's strides
// (kv_layout.hpp): chunk (block, half) of layer l at layer(l) + half x half_stride + block x
// block_stride. The tensors a cache owns have the default strides.

#include <cuda_runtime.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "gpu/kv_cache.hpp"

namespace kvtier::gpu::detail {

class device_tensors {
 public:
  virtual ~device_tensors() = default;
  /// The base of `layer`: its first block's K (or latent).
  uint8_t* layer(uint32_t l) const { return layers_[l]; }
  /// The chunk of (block, layer, half), whatever the strides.
  uint8_t* chunk(uint32_t block, uint32_t l, kv_half half) const {
    return layers_[l] + layout_.layer_offset(block, half);
  }
  /// The address of an offset in the arena layout (kv_layout::device_offset and its runs within
  /// one tensor): only for tensors of the default strides.
  uint8_t* at(uint64_t arena_offset) const;
  /// Bytes that a bulk copy may cover from layer(0) on: contiguous in this memory.
  virtual uint64_t contiguous_bytes() const = 0;
  /// Handles for another process (own_exported only; throws otherwise).
  virtual std::vector<layer_tensor_handle> export_layers() const;

  /// Allocates or opens the tensors that `config` names, shaped by `layout`.
  static std::unique_ptr<device_tensors> make(const kv_cache_config& config,
                                              const kv_layout& layout);

 protected:
  explicit device_tensors(const kv_layout& layout)
      : layout_(layout), tensor_bytes_(layout.tensor_bytes()) {}
  kv_layout layout_;
  uint64_t tensor_bytes_;
  std::vector<uint8_t*> layers_;
};

}  // namespace kvtier::gpu::detail
