// The staging plan over the layouts an engine brings (kv_layout.hpp): MLA's one latent per layer
// and block, and tensors of other strides (FlashInfer's K beside V in each block). Executed on
// the CPU as the kernels address chunks (layer base + half x half stride + block x block
// stride): every byte lands where the layout says, nothing else changes, and runs of blocks are
// never copied directly where the strides make them not contiguous.

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

#include <catch2/catch.hpp>

#include "gpu/staging_plan.hpp"
#include "gpu/verify_pattern.hpp"
#include "staging_run.hpp"
#include "test_shapes.hpp"

using namespace kvtier;
using namespace kvtier::gpu;

// Its own namespace: the unity build compiles the GPU unit tests together.
namespace staging_layouts_test {

namespace {

constexpr uint32_t blocks = 24;
constexpr std::byte poison{0x5a};

// An engine's memory: each layer's tensors at its own base, `pad` bytes apart.
struct engine_memory {
  kv_layout layout;
  uint64_t layer_bytes;
  std::vector<std::byte> device, host;

  explicit engine_memory(const kv_layout& l)
      : layout(l), layer_bytes(l.layer_span() + 48),
        device(l.shape.layers * layer_bytes, poison), host(l.host_bytes(), poison) {}

  std::byte* chunk(uint32_t block, uint32_t layer, kv_half h) {
    return device.data() + layer * layer_bytes + layout.layer_offset(block, h);
  }
};

void execute(engine_memory& m, const staging_plan& plan, transfer_direction d,
             const staging_limits& limits) {
  const kv_layout& l = m.layout;
  // Runs of blocks are one span only in tensors of the default strides.
  if (!l.default_strides())
    for (const plan_step& step : plan.steps)
      REQUIRE(step.direct.empty());
  // A direct copy's arena offset names (layer, half, block); the engine's layer has its own
  // base, as the CUDA backend's device_tensors::at maps it.
  auto device_at = [&](uint64_t at) {
    uint64_t tensor = at / l.tensor_bytes();
    return m.device.data() + tensor / l.halves() * m.layer_bytes
           + tensor % l.halves() * l.tensor_bytes() + at % l.tensor_bytes();
  };
  gpu::test::run_plan(plan, d, limits, l.halves(), l.chunk_bytes(), m.host.data(), device_at,
                      [&](uint32_t block, uint32_t layer, kv_half h) {
                        return m.chunk(block, layer, h);
                      });
}

std::vector<block_pair> pairs() {
  return {{20, 7}, {21, 8}, {22, 9}, {23, 10}, {3, 17}, {4, 2}, {5, 3}, {11, 20}, {0, 0}};
}

void round_trip(const kv_layout& layout) {
  engine_memory m(layout);
  staging_limits limits;
  limits.slot_bytes = 3 * layout.slice_bytes();
  limits.slot_count = 2;
  limits.direct_min_bytes = layout.chunk_bytes();  // would take every run, were it contiguous
  for (uint32_t h = 0; h < blocks; ++h)
    fill_host_block(m.host.data() + layout.host_offset(h, 0, kv_half::key), layout, 900 + h);
  staging_plan in = plan_staging(layout, pairs(), transfer_direction::h2d, limits);
  execute(m, in, transfer_direction::h2d, limits);
  std::map<uint32_t, uint32_t> source;
  for (const block_pair& p : pairs())
    source[p.device] = p.host;
  auto poisoned = [](const std::byte* p, uint64_t n) {
    return std::all_of(p, p + n, [](std::byte x) { return x == poison; });
  };
  for (uint32_t b = 0; b < blocks; ++b)
    if (!source.count(b))
      for (uint32_t l = 0; l < layout.shape.layers; ++l)
        for (uint32_t h = 0; h < layout.halves(); ++h)
          CHECK(poisoned(m.chunk(b, l, static_cast<kv_half>(h)), layout.chunk_bytes()));
  std::vector<std::byte> tmp(layout.host_block_bytes());
  for (auto [device, host] : source) {
    for (uint32_t l = 0; l < layout.shape.layers; ++l)
      for (uint32_t h = 0; h < layout.halves(); ++h)
        std::memcpy(tmp.data() + layout.host_offset(0, l, static_cast<kv_half>(h)),
                    m.chunk(device, l, static_cast<kv_half>(h)), layout.chunk_bytes());
    CHECK_FALSE(check_host_block(tmp.data(), layout, 900 + host, device));
  }
  // And back, into other host blocks.
  std::vector<block_pair> back;
  for (auto [device, host] : source)
    back.push_back({device, blocks - 1 - host});
  staging_plan out = plan_staging(layout, back, transfer_direction::d2h, limits);
  execute(m, out, transfer_direction::d2h, limits);
  for (const block_pair& p : back)
    CHECK_FALSE(check_host_block(m.host.data() + layout.host_offset(p.host, 0, kv_half::key),
                                 layout, 900 + source[p.device], p.host));
  // Nothing between the chunks was written.
  for (uint32_t l = 0; l < layout.shape.layers; ++l) {
    const std::byte* tail = m.device.data() + l * m.layer_bytes + layout.layer_span();
    CHECK(poisoned(tail, 48));
  }
}

}  // namespace

TEST_CASE("staging over MLA's latent: one half per layer and block", "[gpu][plan][mla]") {
  model_shape mla = test::kv_of(3, 1, 0, 2);
  mla.latent_dim = 24;  // 48-byte latents, 2-token blocks: 96-byte chunks
  round_trip(kv_layout{mla, 2, blocks, blocks});
}

TEST_CASE("staging over FlashInfer's strides: K beside V in each block", "[gpu][plan]") {
  kv_layout l = test::layout_of(3, 1, 8, 2, 2, blocks, blocks);
  l.strides = {l.chunk_bytes(), 2 * l.chunk_bytes()};
  round_trip(l);
}

TEST_CASE("staging over padded FlashAttention blocks", "[gpu][plan]") {
  kv_layout l = test::layout_of(3, 1, 8, 2, 2, blocks, blocks);
  uint64_t stride = l.chunk_bytes() + 32;
  l.strides = {blocks * stride, stride};
  round_trip(l);
}

}  // namespace staging_layouts_test
