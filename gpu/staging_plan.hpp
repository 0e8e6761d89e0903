#pragma once

// How the staging method moves a transfer through a few bounded device buffers ("slots").
//
// The unit is a slice: one (pair, layer), i.e. K and V of one layer of one block, 2 * chunk bytes,
// contiguous on the host. A slot holds up to `slices_per_slot` slices back to back. D2H walks
// the slices pair by pair, every layer of a pair in a row, so a slot maps onto long contiguous
// host spans; H2D walks one layer at a time (layer l of every pair, then layer l + 1), so each
// layer can complete on its own and a slot maps onto host slices one host block apart:
//
//   D2H: device tensors --gather kernel--> slot --one copy per host span--> host blocks
//   H2D: host blocks --one strided copy per host run--> slot --scatter kernel--> device tensors
//
// Pairs are sorted by host id first, so that consecutive host blocks share copies. Runs of pairs
// contiguous on both sides whose per-tensor bytes reach `direct_min_bytes` skip the slots: they
// are copied directly, one strided copy per (layer, K|V), and cost no kernel work on the SMs.
//
// The plan is pure arithmetic: the CUDA backend executes it, and the CPU tests execute it with
// plain memcpy to prove that every byte lands where the layout says.

#include <cstdint>
#include <vector>

#include "gpu/block_runs.hpp"
#include "core/host_device.hpp"
#include "gpu/kv_layout.hpp"

namespace kvtier::gpu {

/// A copy between the host pool and a linear buffer (a slot, or the device arena for a direct
/// copy): `rows` rows of `row_bytes`, `host_pitch` apart on the host and `other_pitch` apart in
/// the other buffer.
struct strided_copy {
  uint64_t host_offset = 0;
  uint64_t other_offset = 0;
  uint64_t row_bytes = 0;
  uint64_t host_pitch = 0;
  uint64_t other_pitch = 0;
  uint32_t rows = 1;

  uint64_t bytes() const { return row_bytes * rows; }
};

/// The slices a slot holds, in slot order. Slice j is layer `layer0 + (lead + j) % span` of pair
/// `first_pair + (lead + j) / span`: span is the layer count for D2H and 1 for H2D.
struct slice_window {
  uint32_t first_pair = 0;  ///< index into staging_plan::pairs
  uint32_t lead = 0;        ///< slices of the first pair that lie before this slot
  uint32_t span = 1;
  uint32_t layer0 = 0;
  uint32_t slice_count = 0;
};

/// One slice of a window: the pair relative to `first_pair`, and its layer.
struct slice_ref {
  uint32_t pair = 0;
  uint32_t layer = 0;
};

KVTIER_HOST_DEVICE inline slice_ref slice_at(const slice_window& w, uint32_t j) {
  uint32_t q = w.lead + j;
  return slice_ref{q / w.span, w.layer0 + q % w.span};
}

/// Pairs a window touches, from its first pair on.
KVTIER_HOST_DEVICE inline uint32_t pairs_touched(const slice_window& w) {
  return w.slice_count == 0 ? 0 : (w.lead + w.slice_count - 1) / w.span + 1;
}

struct staged_slot {
  uint32_t buffer = 0;  ///< which slot buffer, round robin over the plan
  slice_window window;
  std::vector<strided_copy> host_copies;  ///< between the slot (other) and the host pool
};

/// H2D: the work of one layer; D2H: the whole transfer in one step.
struct plan_step {
  uint32_t layer = 0;                ///< H2D: the layer; D2H: 0
  std::vector<strided_copy> direct;  ///< between the device arena (other) and the host pool
  std::vector<staged_slot> slots;
};

struct staging_limits {
  uint64_t slot_bytes = 16ull << 20;
  uint32_t slot_count = 4;
  uint64_t direct_min_bytes = 8ull << 20;  ///< 0: no direct copies
  uint32_t slices_max = 2048;              ///< per slot: the kernels take its ids by value
};

struct staging_plan {
  std::vector<block_pair> pairs;  ///< the staged pairs (direct runs left out), by host id
  std::vector<plan_step> steps;
  uint32_t slices_per_slot = 0;
};

/// Plans moving `pairs` (already checked with check_pairs) in direction `d`.
staging_plan plan_staging(const kv_layout& layout, std::vector<block_pair> pairs,
                          transfer_direction d, const staging_limits& limits);

}  // namespace kvtier::gpu
