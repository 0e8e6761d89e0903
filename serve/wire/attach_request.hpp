#pragma once

// hello's `tensors` (docs/protocol.md, real mode): what an engine exports of its GPU memory.

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvtier::serve {

/// The bytes of a CUDA IPC handle (memory or event), as hello carries them.
inline constexpr size_t ipc_handle_size = 64;
using ipc_bytes = std::array<uint8_t, ipc_handle_size>;

/// hello's `tensors` (version 2): the engine's KV tensors and per-layer completion events.
struct attach_request {
  bool present = false;
  uint32_t device_blocks = 0;             ///< blocks in each layer's K (and V) tensor
  std::vector<ipc_bytes> layer_handles;   ///< one per layer: K at offset, V right after
  std::vector<uint64_t> layer_offsets;
  uint32_t event_slots = 0;
  std::vector<ipc_bytes> events;          ///< event_slots x layers, slot-major
};

}  // namespace kvtier::serve
