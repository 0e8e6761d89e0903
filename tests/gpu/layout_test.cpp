#include "gpu/kv_layout.hpp"

#include <algorithm>
#include <vector>

#include <catch2/catch.hpp>

using namespace kvtier::gpu;

namespace {

const kv_shape llama{32, 8, 128, 16, 2};

}  // namespace

TEST_CASE("kv_shape: sizes of a Llama-3-8B-like block", "[gpu][layout]") {
  CHECK(llama.chunk_bytes() == 16 * 8 * 128 * 2);  // 32 KiB
  CHECK(llama.slice_bytes() == 64 * 1024);
  CHECK(llama.host_block_bytes() == 2 * 1024 * 1024);
  kv_shape big = llama;
  big.block_size = 64;
  CHECK(big.chunk_bytes() == 128 * 1024);
  CHECK(big.host_block_bytes() == 8 * 1024 * 1024);
}

TEST_CASE("kv_shape: unusable shapes are named", "[gpu][layout]") {
  CHECK_FALSE(check_shape(llama));
  kv_shape zero = llama;
  zero.kv_heads = 0;
  REQUIRE(check_shape(zero));
  CHECK(check_shape(zero)->find("positive") != std::string::npos);
  kv_shape odd{2, 1, 3, 1, 2};  // 6-byte chunks
  REQUIRE(check_shape(odd));
  CHECK(check_shape(odd)->find("multiple of 16") != std::string::npos);
}

TEST_CASE("kv_layout: device tensors are layer-major, each [block][chunk]", "[gpu][layout]") {
  kv_layout l{llama, 10, 4};
  uint64_t c = llama.chunk_bytes();
  CHECK(l.tensor_bytes() == 10 * c);
  CHECK(l.device_bytes() == 2 * 32 * 10 * c);
  CHECK(l.tensor_offset(0, kv_half::key) == 0);
  CHECK(l.tensor_offset(0, kv_half::value) == 10 * c);
  CHECK(l.tensor_offset(2, kv_half::value) == 5 * 10 * c);
  CHECK(l.device_offset(3, 2, kv_half::value) == 5 * 10 * c + 3 * c);
}

TEST_CASE("kv_layout: host blocks are block-major, K beside V per layer", "[gpu][layout]") {
  kv_layout l{llama, 10, 6};
  uint64_t c = llama.chunk_bytes();
  CHECK(l.host_bytes() == 6 * llama.host_block_bytes());
  CHECK(l.host_offset(0, 0, kv_half::key) == 0);
  CHECK(l.host_offset(0, 0, kv_half::value) == c);
  CHECK(l.host_offset(4, 2, kv_half::value) == 4 * llama.host_block_bytes() + 2 * 2 * c + c);
}

TEST_CASE("kv_layout: the chunks tile both buffers exactly", "[gpu][layout]") {
  kv_shape s{3, 1, 8, 2, 2};  // 32-byte chunks
  kv_layout l{s, 5, 4};
  for (bool device : {true, false}) {
    std::vector<uint64_t> offsets;
    uint32_t blocks = device ? l.device_blocks : l.host_blocks;
    for (uint32_t b = 0; b < blocks; ++b)
      for (uint32_t layer = 0; layer < s.layers; ++layer)
        for (kv_half h : {kv_half::key, kv_half::value})
          offsets.push_back(device ? l.device_offset(b, layer, h) : l.host_offset(b, layer, h));
    std::sort(offsets.begin(), offsets.end());
    for (size_t i = 0; i < offsets.size(); ++i)
      CHECK(offsets[i] == i * s.chunk_bytes());
    CHECK(offsets.size() * s.chunk_bytes() == (device ? l.device_bytes() : l.host_bytes()));
  }
}
