#include "gpu/staging_plan.hpp"

#include <algorithm>

#include "core/check.hpp"

namespace kvtier::gpu {

namespace {

struct direct_run {
  block_pair first;
  uint32_t count = 0;
};

/// Moves the runs long enough for direct copies out of `pairs` (sorted by host id).
std::vector<direct_run> take_direct_runs(const kv_layout& layout, std::vector<block_pair>& pairs,
                                         uint64_t direct_min_bytes) {
  std::vector<direct_run> direct;
  if (direct_min_bytes == 0)
    return direct;
  std::vector<block_pair> staged;
  for (const block_run& r : find_runs(pairs, run_rule::both_ids)) {
    if (r.count * layout.chunk_bytes() >= direct_min_bytes)
      direct.push_back(direct_run{pairs[r.first], r.count});
    else
      staged.insert(staged.end(), pairs.begin() + r.first, pairs.begin() + r.first + r.count);
  }
  pairs = std::move(staged);
  return direct;
}

/// One strided copy per half: the run's chunks lie back to back in the device tensor and one
/// host block apart on the host.
void add_direct_copies(const kv_layout& layout, const direct_run& run, uint32_t layer,
                       std::vector<strided_copy>& out) {
  for (kv_half half : {kv_half::key, kv_half::value}) {
    strided_copy c;
    c.host_offset = layout.host_offset(run.first.host, layer, half);
    c.other_offset = layout.device_offset(run.first.device, layer, half);
    c.row_bytes = layout.chunk_bytes();
    c.host_pitch = layout.host_block_bytes();
    c.other_pitch = layout.chunk_bytes();
    c.rows = run.count;
    out.push_back(c);
  }
}

/// H2D slot over pairs [a, b) of one layer: one strided copy per run of consecutive host ids.
std::vector<strided_copy> h2d_host_copies(const kv_layout& layout,
                                          const std::vector<block_pair>& pairs, uint32_t a,
                                          uint32_t b, uint32_t layer) {
  std::vector<strided_copy> copies;
  uint64_t slice = layout.slice_bytes();
  for (uint32_t i = a; i < b; ++i) {
    bool extends = i > a && pairs[i].host == pairs[i - 1].host + 1;
    if (extends) {
      ++copies.back().rows;
      continue;
    }
    strided_copy c;
    c.host_offset = layout.host_offset(pairs[i].host, layer, kv_half::key);
    c.other_offset = uint64_t{i - a} * slice;
    c.row_bytes = slice;
    c.host_pitch = layout.host_block_bytes();
    c.other_pitch = slice;
    copies.push_back(c);
  }
  return copies;
}

/// D2H slot over slices [s0, s1) (slice s = layer s % L of pair s / L): one copy per contiguous
/// host span, since every layer of a block, and consecutive blocks, lie back to back.
std::vector<strided_copy> d2h_host_copies(const kv_layout& layout,
                                          const std::vector<block_pair>& pairs, uint64_t s0,
                                          uint64_t s1) {
  std::vector<strided_copy> copies;
  uint64_t layers = layout.shape.layers;
  uint64_t slice = layout.slice_bytes();
  for (uint64_t i = s0 / layers; i * layers < s1; ++i) {
    uint64_t la = std::max(s0, i * layers) - i * layers;
    uint64_t lb = std::min(s1, (i + 1) * layers) - i * layers;
    uint64_t host = layout.host_offset(pairs[i].host, static_cast<uint32_t>(la), kv_half::key);
    uint64_t bytes = (lb - la) * slice;
    if (!copies.empty() && copies.back().host_offset + copies.back().row_bytes == host) {
      copies.back().row_bytes += bytes;
      continue;
    }
    strided_copy c;
    c.host_offset = host;
    c.other_offset = (i * layers + la - s0) * slice;
    c.row_bytes = bytes;
    c.host_pitch = bytes;
    c.other_pitch = bytes;
    copies.push_back(c);
  }
  return copies;
}

}  // namespace

staging_plan plan_staging(const kv_layout& layout, std::vector<block_pair> pairs,
                          transfer_direction d, const staging_limits& limits) {
  KVTIER_ASSERT(limits.slot_count > 0);
  KVTIER_ASSERT(limits.slot_bytes >= layout.slice_bytes());
  staging_plan plan;
  uint64_t per_slot = std::min<uint64_t>(limits.slot_bytes / layout.slice_bytes(),
                                         limits.slices_max);
  plan.slices_per_slot = static_cast<uint32_t>(per_slot);
  KVTIER_ASSERT(plan.slices_per_slot > 0);
  std::sort(pairs.begin(), pairs.end(), [](const block_pair& a, const block_pair& b) {
    return a.host != b.host ? a.host < b.host : a.device < b.device;
  });
  std::vector<direct_run> direct = take_direct_runs(layout, pairs, limits.direct_min_bytes);
  plan.pairs = std::move(pairs);
  uint32_t layers = layout.shape.layers;
  uint32_t n = static_cast<uint32_t>(plan.pairs.size());
  uint32_t next_buffer = 0;
  auto add_slot = [&](plan_step& step, slice_window w, std::vector<strided_copy> copies) {
    step.slots.push_back(staged_slot{next_buffer, w, std::move(copies)});
    next_buffer = (next_buffer + 1) % limits.slot_count;
  };
  if (d == transfer_direction::h2d) {
    for (uint32_t l = 0; l < layers; ++l) {
      plan_step& step = plan.steps.emplace_back();
      step.layer = l;
      for (const direct_run& r : direct)
        add_direct_copies(layout, r, l, step.direct);
      for (uint32_t a = 0; a < n; a += plan.slices_per_slot) {
        uint32_t b = std::min(n, a + plan.slices_per_slot);
        add_slot(step, slice_window{a, 0, 1, l, b - a},
                 h2d_host_copies(layout, plan.pairs, a, b, l));
      }
    }
    return plan;
  }
  plan_step& step = plan.steps.emplace_back();
  for (uint32_t l = 0; l < layers; ++l)
    for (const direct_run& r : direct)
      add_direct_copies(layout, r, l, step.direct);
  uint64_t total = uint64_t{n} * layers;
  for (uint64_t s0 = 0; s0 < total; s0 += plan.slices_per_slot) {
    uint64_t s1 = std::min(total, s0 + plan.slices_per_slot);
    slice_window w{static_cast<uint32_t>(s0 / layers), static_cast<uint32_t>(s0 % layers), layers,
                   0, static_cast<uint32_t>(s1 - s0)};
    add_slot(step, w, d2h_host_copies(layout, plan.pairs, s0, s1));
  }
  return plan;
}

}  // namespace kvtier::gpu
