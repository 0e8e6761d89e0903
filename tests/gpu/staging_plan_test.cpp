// The staging plan executed on the CPU with plain memcpy, following the same slice arithmetic
// as the kernels (slice_at): every byte must land where kv_layout says, and nothing else may
// change.

#include "gpu/staging_plan.hpp"

#include <cstring>
#include <map>
#include <vector>

#include <catch2/catch.hpp>

#include "gpu/verify_pattern.hpp"
#include "staging_run.hpp"
#include "test_shapes.hpp"

using namespace kvtier::gpu;

namespace {

// 32-byte chunks, 64-byte slices, 192-byte host blocks
const kv_layout sizes = test::layout_of(3, 1, 8, 2, 2);
constexpr uint32_t device_blocks = 40;
constexpr uint32_t host_blocks = 40;
constexpr std::byte poison{0xa5};

struct memory {
  kv_layout layout = test::layout_of(3, 1, 8, 2, 2, device_blocks, host_blocks);
  std::vector<std::byte> device = std::vector<std::byte>(layout.device_bytes(), poison);
  std::vector<std::byte> host = std::vector<std::byte>(layout.host_bytes(), poison);
};

/// What the CUDA backend does with a plan (staging_run.hpp) over this test's arena.
void execute(memory& m, const staging_plan& plan, transfer_direction d,
             const staging_limits& limits) {
  test::run_plan(
    plan, d, limits, 2, sizes.chunk_bytes(), m.host.data(),
    [&](uint64_t offset) { return m.device.data() + offset; },
    [&](uint32_t block, uint32_t layer, kv_half h) {
      return m.device.data() + m.layout.device_offset(block, layer, h);
    });
}

void fill_device_block(memory& m, uint32_t block, uint64_t hash) {
  std::vector<std::byte> tmp(sizes.host_block_bytes());
  fill_host_block(tmp.data(), sizes, hash);
  for (uint32_t l = 0; l < sizes.shape.layers; ++l)
    for (kv_half h : {kv_half::key, kv_half::value})
      std::memcpy(m.device.data() + m.layout.device_offset(block, l, h),
                  tmp.data() + (2 * l + static_cast<uint32_t>(h)) * sizes.chunk_bytes(),
                  sizes.chunk_bytes());
}

bool device_block_holds(const memory& m, uint32_t block, uint64_t hash) {
  std::vector<std::byte> tmp(sizes.host_block_bytes());
  for (uint32_t l = 0; l < sizes.shape.layers; ++l)
    for (kv_half h : {kv_half::key, kv_half::value})
      std::memcpy(tmp.data() + (2 * l + static_cast<uint32_t>(h)) * sizes.chunk_bytes(),
                  m.device.data() + m.layout.device_offset(block, l, h), sizes.chunk_bytes());
  return !check_host_block(tmp.data(), sizes, hash, block);
}

bool is_poison(const std::byte* p, uint64_t bytes) {
  for (uint64_t i = 0; i < bytes; ++i)
    if (p[i] != poison)
      return false;
  return true;
}

/// Device runs of several lengths (3 and 4 reach direct_min_bytes = 3 chunks), singles, host
/// ids partly consecutive, given out of order.
std::vector<block_pair> mixed_pairs() {
  return {{20, 7}, {21, 8}, {22, 9}, {23, 10},  // run of 4, both sides
          {3, 30},  {30, 2},  {31, 3},           // single, then run of 2
          {11, 20}, {12, 21}, {13, 22},          // run of 3
          {5, 15},  {9, 16},  {1, 17},           // host-consecutive only
          {38, 39}, {0, 0},   {17, 25}};
}

staging_limits tight_limits() {
  staging_limits l;
  l.slot_bytes = 5 * sizes.slice_bytes();  // 5 slices: slots end inside a block's layers
  l.slot_count = 3;
  l.direct_min_bytes = 3 * sizes.chunk_bytes();
  return l;
}

}  // namespace

TEST_CASE("staging plan: D2H lands every chunk in its host block", "[gpu][plan]") {
  for (uint64_t direct : {uint64_t{0}, 3 * sizes.chunk_bytes()}) {
    memory m;
    for (uint32_t b = 0; b < device_blocks; ++b)
      fill_device_block(m, b, 1000 + b);
    staging_limits limits = tight_limits();
    limits.direct_min_bytes = direct;
    std::vector<block_pair> pairs = mixed_pairs();
    staging_plan plan = plan_staging(m.layout, pairs, transfer_direction::d2h, limits);
    execute(m, plan, transfer_direction::d2h, limits);
    std::map<uint32_t, uint32_t> source_of;
    for (const block_pair& p : pairs)
      source_of[p.host] = p.device;
    for (uint32_t h = 0; h < host_blocks; ++h) {
      const std::byte* block = m.host.data() + m.layout.host_offset(h, 0, kv_half::key);
      if (source_of.count(h))
        CHECK_FALSE(check_host_block(block, sizes, 1000 + source_of[h], h));
      else
        CHECK(is_poison(block, sizes.host_block_bytes()));
    }
  }
}

TEST_CASE("staging plan: H2D lands every chunk in its device block", "[gpu][plan]") {
  for (uint64_t direct : {uint64_t{0}, 3 * sizes.chunk_bytes()}) {
    memory m;
    for (uint32_t h = 0; h < host_blocks; ++h)
      fill_host_block(m.host.data() + m.layout.host_offset(h, 0, kv_half::key), sizes, 500 + h);
    staging_limits limits = tight_limits();
    limits.direct_min_bytes = direct;
    std::vector<block_pair> pairs = mixed_pairs();
    staging_plan plan = plan_staging(m.layout, pairs, transfer_direction::h2d, limits);
    execute(m, plan, transfer_direction::h2d, limits);
    std::map<uint32_t, uint32_t> source_of;
    for (const block_pair& p : pairs)
      source_of[p.device] = p.host;
    for (uint32_t b = 0; b < device_blocks; ++b) {
      if (source_of.count(b)) {
        CHECK(device_block_holds(m, b, 500 + source_of[b]));
        continue;
      }
      for (uint32_t l = 0; l < sizes.shape.layers; ++l)
        CHECK(is_poison(m.device.data() + m.layout.device_offset(b, l, kv_half::key),
                        sizes.chunk_bytes()));
    }
  }
}

TEST_CASE("staging plan: H2D steps go layer by layer over every staged pair", "[gpu][plan]") {
  memory m;
  staging_limits limits = tight_limits();
  staging_plan plan = plan_staging(m.layout, mixed_pairs(), transfer_direction::h2d, limits);
  REQUIRE(plan.steps.size() == sizes.shape.layers);
  // Runs of 3 and 4 go direct (two copies per run and layer); 9 pairs stay staged.
  CHECK(plan.pairs.size() == 9);
  CHECK(std::is_sorted(plan.pairs.begin(), plan.pairs.end(),
                       [](const block_pair& a, const block_pair& b) { return a.host < b.host; }));
  CHECK(plan.slices_per_slot == 5);
  uint32_t expected_buffer = 0;
  for (uint32_t l = 0; l < sizes.shape.layers; ++l) {
    const plan_step& step = plan.steps[l];
    CHECK(step.layer == l);
    CHECK(step.direct.size() == 4);
    uint32_t slices = 0;
    for (const staged_slot& slot : step.slots) {
      CHECK(slot.buffer == expected_buffer);
      expected_buffer = (expected_buffer + 1) % limits.slot_count;
      CHECK(slot.window.layer0 == l);
      CHECK(slot.window.first_pair == slices);
      uint64_t bytes = 0;
      for (const strided_copy& c : slot.host_copies)
        bytes += c.bytes();
      CHECK(bytes == slot.window.slice_count * sizes.slice_bytes());
      slices += slot.window.slice_count;
    }
    CHECK(slices == plan.pairs.size());
  }
}

TEST_CASE("staging plan: consecutive host blocks share one copy", "[gpu][plan]") {
  memory m;
  staging_limits limits;
  limits.slot_bytes = 1 << 20;
  limits.direct_min_bytes = 0;
  std::vector<block_pair> pairs;
  for (uint32_t i = 0; i < 8; ++i)
    pairs.push_back(block_pair{(i * 7) % device_blocks, 10 + i});  // scattered on the device
  staging_plan d2h = plan_staging(m.layout, pairs, transfer_direction::d2h, limits);
  REQUIRE(d2h.steps.size() == 1);
  REQUIRE(d2h.steps[0].slots.size() == 1);
  REQUIRE(d2h.steps[0].slots[0].host_copies.size() == 1);
  CHECK(d2h.steps[0].slots[0].host_copies[0].bytes() == 8 * sizes.host_block_bytes());
  staging_plan h2d = plan_staging(m.layout, pairs, transfer_direction::h2d, limits);
  for (const plan_step& step : h2d.steps) {
    REQUIRE(step.slots.size() == 1);
    REQUIRE(step.slots[0].host_copies.size() == 1);
    CHECK(step.slots[0].host_copies[0].rows == 8);
    CHECK(step.slots[0].host_copies[0].host_pitch == sizes.host_block_bytes());
  }
}

TEST_CASE("staging plan: an empty transfer has steps but no work", "[gpu][plan]") {
  memory m;
  staging_plan h2d = plan_staging(m.layout, {}, transfer_direction::h2d, tight_limits());
  CHECK(h2d.steps.size() == sizes.shape.layers);
  for (const plan_step& step : h2d.steps)
    CHECK((step.slots.empty() && step.direct.empty()));
  staging_plan d2h = plan_staging(m.layout, {}, transfer_direction::d2h, tight_limits());
  REQUIRE(d2h.steps.size() == 1);
  CHECK(d2h.steps[0].slots.empty());
}
