#include "gpu/verify_pattern.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include <catch2/catch.hpp>

#include "test_shapes.hpp"

using namespace kvtier::gpu;

namespace {

const kv_layout shape = test::layout_of(4, 2, 16, 4, 2);  // 256-byte chunks, 2 KiB blocks

}  // namespace

TEST_CASE("verify pattern: a filled block checks clean", "[gpu][verify]") {
  std::vector<std::byte> block(shape.host_block_bytes());
  fill_host_block(block.data(), shape, 42);
  CHECK_FALSE(check_host_block(block.data(), shape, 42, 7));
}

TEST_CASE("verify pattern: one wrong byte is found and placed", "[gpu][verify]") {
  std::vector<std::byte> block(shape.host_block_bytes());
  fill_host_block(block.data(), shape, 42);
  // Layer 2, V, byte 43 of the chunk: inside the word at byte 40.
  uint64_t at = (2 * 2 + 1) * shape.chunk_bytes() + 43;
  block[at] ^= std::byte{0x10};
  auto bad = check_host_block(block.data(), shape, 42, 7);
  REQUIRE(bad);
  CHECK_FALSE(bad->on_device);
  CHECK(bad->block == 7);
  CHECK(bad->layer == 2);
  CHECK(bad->half == kv_half::value);
  CHECK(bad->byte_offset == 40);
  CHECK(bad->hash == 42);
  CHECK(bad->expected != bad->found);
  CHECK((bad->expected ^ bad->found) == (uint64_t{0x10} << 24));
  CHECK(to_string(*bad).rfind("verify: host block 7, layer 2 V, byte 40: expected 0x", 0) == 0);
}

TEST_CASE("verify pattern: another hash is a mismatch at the first word", "[gpu][verify]") {
  std::vector<std::byte> block(shape.host_block_bytes());
  fill_host_block(block.data(), shape, 42);
  auto bad = check_host_block(block.data(), shape, 43, 0);
  REQUIRE(bad);
  CHECK(bad->layer == 0);
  CHECK(bad->half == kv_half::key);
  CHECK(bad->byte_offset == 0);
}

TEST_CASE("verify pattern: chunks of one block differ from each other", "[gpu][verify]") {
  // A chunk copied to the wrong layer or half must not pass.
  std::vector<uint64_t> first_words;
  for (uint32_t layer = 0; layer < shape.shape.layers; ++layer)
    for (kv_half h : {kv_half::key, kv_half::value})
      first_words.push_back(pattern_word(chunk_seed(42, layer, h), 0));
  std::sort(first_words.begin(), first_words.end());
  CHECK(std::adjacent_find(first_words.begin(), first_words.end()) == first_words.end());
  CHECK(pattern_word(chunk_seed(42, 0, kv_half::key), 0)
        != pattern_word(chunk_seed(42, 0, kv_half::key), 1));
}

TEST_CASE("verify pattern: a swapped K and V are caught", "[gpu][verify]") {
  std::vector<std::byte> block(shape.host_block_bytes());
  fill_host_block(block.data(), shape, 5);
  std::vector<std::byte> k(block.begin(), block.begin() + shape.chunk_bytes());
  std::memcpy(block.data(), block.data() + shape.chunk_bytes(), shape.chunk_bytes());
  std::memcpy(block.data() + shape.chunk_bytes(), k.data(), shape.chunk_bytes());
  auto bad = check_host_block(block.data(), shape, 5, 1);
  REQUIRE(bad);
  CHECK(bad->layer == 0);
  CHECK(bad->half == kv_half::key);
}
