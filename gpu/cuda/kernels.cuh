#pragma once

// The backend's kernels, each behind a launch function that checks the launch. Block ids travel
// by value in the kernel parameters (up to 32 KiB on sm_70+ with CUDA 12.1+, read through
// __grid_constant__), so no id array has to be uploaded or kept alive per transfer.

#include <cuda_runtime.h>

#include <cstdint>

#include "gpu/block_runs.hpp"
#include "gpu/kv_layout.hpp"
#include "gpu/staging_plan.hpp"

namespace kvtier::gpu::detail {

constexpr uint32_t slot_ids_max = 2048;         ///< staging_limits::slices_max of the plans
constexpr uint32_t zero_copy_pairs_max = 1024;  ///< pairs per zero-copy launch
constexpr uint32_t pattern_blocks_max = 1024;   ///< blocks per fill/poison/check launch

/// The device tensors: chunk (block, layer, half) lies at
/// layer_base[layer] + half * half_stride + block * block_stride (kv_layout.hpp). One address
/// per layer, so that the tensors may be one arena or an engine's separate per-layer allocations
/// (device_tensors.cuh). `halves`: 2 (K and V) or 1 (MLA's latent).
struct tensor_view {
  uint8_t* layer_base[max_layers] = {};
  uint64_t half_stride = 0;
  uint64_t block_stride = 0;
  uint64_t chunk_bytes = 0;
  uint32_t layers = 0;
  uint32_t halves = 2;
};

struct slot_args {
  tensor_view tensors;
  uint8_t* slot = nullptr;
  slice_window window;
  uint32_t device_ids[slot_ids_max];  ///< of the window's pairs, from its first pair on
};

/// Copies the window's slices from the tensors into the slot (D2H staging).
void launch_gather(const slot_args& args, cudaStream_t stream);
/// Copies the window's slices from the slot into the tensors (H2D staging).
void launch_scatter(const slot_args& args, cudaStream_t stream);

struct zero_copy_args {
  tensor_view tensors;
  uint8_t* host = nullptr;  ///< the host pool as the device addresses it
  uint64_t host_block_bytes = 0;
  uint32_t layer_first = 0;
  uint32_t layer_count = 0;
  uint32_t pair_count = 0;
  uint32_t device_ids[zero_copy_pairs_max];
  uint32_t host_ids[zero_copy_pairs_max];
};

/// Moves the chunks of layers [layer_first, layer_first + layer_count) of the pairs directly
/// between the tensors and mapped host memory, with `ctas` CTAs.
void launch_zero_copy(const zero_copy_args& args, transfer_direction d, uint32_t ctas,
                      cudaStream_t stream);

struct pattern_args {
  tensor_view tensors;
  uint32_t count = 0;
  uint32_t blocks[pattern_blocks_max];
  uint64_t hashes[pattern_blocks_max];
};

void launch_fill(const pattern_args& args, cudaStream_t stream);
void launch_poison(const pattern_args& args, uint8_t byte, cudaStream_t stream);
/// Lowers *first_bad to the key (item << 32 | word) of every mismatching 8-byte word, where
/// item = (list index * layers + layer) * halves + half; *first_bad must start at ~0.
void launch_check(const pattern_args& args, unsigned long long* first_bad, cudaStream_t stream);

/// One thread busy for `spin_ns` of the device's global timer.
void launch_busy(uint64_t spin_ns, cudaStream_t stream);
/// Writes the smallest step of the global timer seen in a tight loop.
void launch_timer_probe(unsigned long long* tick_ns, cudaStream_t stream);

/// Loads every kernel now, so that no first launch pays for loading its module (CUDA loads
/// lazily by default) in the middle of a timed transfer.
void preload_kernels();

}  // namespace kvtier::gpu::detail
