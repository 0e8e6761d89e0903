#include "gpu/kv_layout.hpp"

#include <algorithm>
#include <vector>

#include <catch2/catch.hpp>

#include "test_shapes.hpp"

using namespace kvtier;
using namespace kvtier::gpu;
using namespace kvtier::gpu::test;

namespace {

const model_shape llama = kv_of(32, 8, 128, 2);

}  // namespace

TEST_CASE("kv_layout: sizes of a Llama-3-8B-like block", "[gpu][layout]") {
  kv_layout l{llama, 16};
  CHECK(l.chunk_bytes() == 16 * 8 * 128 * 2);  // 32 KiB
  CHECK(l.slice_bytes() == 64 * 1024);
  CHECK(l.host_block_bytes() == 2 * 1024 * 1024);
  kv_layout big{llama, 64};
  CHECK(big.chunk_bytes() == 128 * 1024);
  CHECK(big.host_block_bytes() == 8 * 1024 * 1024);
  // The default shape is the model's own: a host block is its bytes per token times the tokens.
  CHECK(kv_layout{llama3_8b_kv(), 16}.host_block_bytes() == llama3_8b_kv().bytes_per_token() * 16);
}

TEST_CASE("kv_layout: unusable shapes are named", "[gpu][layout]") {
  CHECK_FALSE(check_shape(llama, 16));
  model_shape zero = llama;
  zero.kv_heads = 0;
  REQUIRE(check_shape(zero, 16));
  CHECK(check_shape(zero, 16)->find("positive") != std::string::npos);
  REQUIRE(check_shape(llama, 0));
  CHECK(check_shape(llama, 0)->find("positive") != std::string::npos);
  REQUIRE(check_shape(kv_of(2, 1, 3, 2), 1));  // 6-byte chunks
  CHECK(check_shape(kv_of(2, 1, 3, 2), 1)->find("multiple of 16") != std::string::npos);
  REQUIRE(check_shape(kv_of(max_layers + 1, 1, 8, 2), 16));
  CHECK(check_shape(kv_of(max_layers + 1, 1, 8, 2), 16)->find("at most") != std::string::npos);
  // MLA caches one latent per layer and token, no K and V per head: not laid out here (yet), so
  // a block is never sized as if it were.
  model_shape mla = kv_of(61, 1, 128, 2);
  mla.latent_dim = 576;
  REQUIRE(check_shape(mla, 64));
  CHECK(check_shape(mla, 64)->find("MLA") != std::string::npos);
}

TEST_CASE("kv_layout: device tensors are layer-major, each [block][chunk]", "[gpu][layout]") {
  kv_layout l{llama, 16, 10, 4};
  uint64_t c = l.chunk_bytes();
  CHECK(l.tensor_bytes() == 10 * c);
  CHECK(l.device_bytes() == 2 * 32 * 10 * c);
  CHECK(l.tensor_offset(0, kv_half::key) == 0);
  CHECK(l.tensor_offset(0, kv_half::value) == 10 * c);
  CHECK(l.tensor_offset(2, kv_half::value) == 5 * 10 * c);
  CHECK(l.device_offset(3, 2, kv_half::value) == 5 * 10 * c + 3 * c);
}

TEST_CASE("kv_layout: host blocks are block-major, K beside V per layer", "[gpu][layout]") {
  kv_layout l{llama, 16, 10, 6};
  uint64_t c = l.chunk_bytes();
  CHECK(l.host_bytes() == 6 * l.host_block_bytes());
  CHECK(l.host_offset(0, 0, kv_half::key) == 0);
  CHECK(l.host_offset(0, 0, kv_half::value) == c);
  CHECK(l.host_offset(4, 2, kv_half::value) == 4 * l.host_block_bytes() + 2 * 2 * c + c);
}

TEST_CASE("kv_layout: the chunks tile both buffers exactly", "[gpu][layout]") {
  kv_layout l = layout_of(3, 1, 8, 2, 2, 5, 4);  // 32-byte chunks
  for (bool device : {true, false}) {
    std::vector<uint64_t> offsets;
    uint32_t blocks = device ? l.device_blocks : l.host_blocks;
    for (uint32_t b = 0; b < blocks; ++b)
      for (uint32_t layer = 0; layer < l.shape.layers; ++layer)
        for (kv_half h : {kv_half::key, kv_half::value})
          offsets.push_back(device ? l.device_offset(b, layer, h) : l.host_offset(b, layer, h));
    std::sort(offsets.begin(), offsets.end());
    for (size_t i = 0; i < offsets.size(); ++i)
      CHECK(offsets[i] == i * l.chunk_bytes());
    CHECK(offsets.size() * l.chunk_bytes() == (device ? l.device_bytes() : l.host_bytes()));
  }
}
