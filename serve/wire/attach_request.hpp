#pragma once

// The engine's KV tensors as `hello` and `attach` carry them (`tensors`, docs/protocol.md, real
// mode): on its GPU through CUDA IPC, or in POSIX shared memory (the CPU real mode).

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace kvtier::serve {

/// The bytes of a CUDA IPC handle (memory or event), as hello carries them.
inline constexpr size_t ipc_handle_size = 64;
using ipc_bytes = std::array<uint8_t, ipc_handle_size>;

/// Where the engine's tensors are (`tensors.memory`).
enum class tensor_memory : uint8_t { cuda_ipc, shm };

/// `tensors`: the engine's per-layer KV tensors and per-layer completion signals.
struct attach_request {
  bool present = false;
  tensor_memory memory = tensor_memory::cuda_ipc;
  uint32_t device_blocks = 0;             ///< blocks in each layer's tensors
  /// One entry per layer: its base at `layer_offsets[l]` bytes into the allocation that the
  /// CUDA IPC handle (cuda_ipc) or the shared memory object (shm) names.
  std::vector<ipc_bytes> layer_handles;
  std::vector<std::string> layer_segments;
  std::vector<uint64_t> layer_offsets;
  /// Bytes from a layer's base to block b's half h: h x half_stride + b x block_stride; zero:
  /// the default layout (K and V tensors each [device_blocks][chunk]).
  uint64_t half_stride = 0;
  uint64_t block_stride = 0;
  uint32_t event_slots = 0;
  std::vector<ipc_bytes> events;          ///< cuda_ipc: event_slots x layers, slot-major
  std::string signals;                    ///< shm: the signal segment (its words likewise)

  bool operator==(const attach_request& o) const {
    return memory == o.memory && device_blocks == o.device_blocks
           && layer_handles == o.layer_handles && layer_segments == o.layer_segments
           && layer_offsets == o.layer_offsets && half_stride == o.half_stride
           && block_stride == o.block_stride && event_slots == o.event_slots
           && events == o.events && signals == o.signals;
  }
  bool operator!=(const attach_request& o) const { return !(*this == o); }
};

}  // namespace kvtier::serve
