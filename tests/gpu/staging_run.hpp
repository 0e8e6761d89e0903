#pragma once

// What the CUDA backend does with a staging plan, on the CPU: memcpy for its DMA, loops for its
// kernels, following the same slice arithmetic (slice_at). The staging tests run it over engine
// memory of their own (staging_plan_test.cpp, staging_layouts_test.cpp).

#include <cstdint>
#include <cstring>
#include <vector>

#include <catch2/catch.hpp>

#include "gpu/staging_plan.hpp"

namespace kvtier::gpu::test {

/// The rows of one strided copy between host memory and another buffer.
inline void copy_rows(const strided_copy& c, std::byte* host, std::byte* other, bool to_host) {
  for (uint32_t r = 0; r < c.rows; ++r) {
    std::byte* h = host + c.host_offset + r * c.host_pitch;
    std::byte* o = other + c.other_offset + r * c.other_pitch;
    std::memcpy(to_host ? h : o, to_host ? o : h, c.row_bytes);
  }
}

/// Runs `plan` in direction `d`. `device_at(offset)`: the device byte a direct copy's arena
/// offset names; `chunk_at(block, layer, half)`: a device chunk, as a kernel addresses it.
template <class DeviceAt, class ChunkAt>
void run_plan(const staging_plan& plan, transfer_direction d, const staging_limits& limits,
              uint32_t halves, uint64_t chunk, std::byte* host, DeviceAt device_at,
              ChunkAt chunk_at) {
  bool h2d = d == transfer_direction::h2d;
  for (const plan_step& step : plan.steps) {
    for (const strided_copy& c : step.direct)
      for (uint32_t r = 0; r < c.rows; ++r) {
        std::byte* dev = device_at(c.other_offset + r * c.other_pitch);
        std::byte* h = host + c.host_offset + r * c.host_pitch;
        std::memcpy(h2d ? dev : h, h2d ? h : dev, c.row_bytes);
      }
    for (const staged_slot& slot : step.slots) {
      REQUIRE(slot.buffer < limits.slot_count);
      REQUIRE(slot.window.slice_count <= plan.slices_per_slot);
      std::vector<std::byte> buf(limits.slot_bytes, std::byte{0});
      if (h2d)
        for (const strided_copy& c : slot.host_copies)
          copy_rows(c, host, buf.data(), false);
      for (uint32_t j = 0; j < slot.window.slice_count; ++j) {
        slice_ref r = slice_at(slot.window, j);
        uint32_t block = plan.pairs[slot.window.first_pair + r.pair].device;
        for (uint32_t h = 0; h < halves; ++h) {
          std::byte* dev = chunk_at(block, r.layer, static_cast<kv_half>(h));
          std::byte* st = buf.data() + (halves * j + h) * chunk;
          std::memcpy(h2d ? dev : st, h2d ? st : dev, chunk);
        }
      }
      if (!h2d)
        for (const strided_copy& c : slot.host_copies)
          copy_rows(c, host, buf.data(), true);
    }
  }
}

}  // namespace kvtier::gpu::test
