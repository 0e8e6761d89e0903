#include "core/block_hash.hpp"

#include <catch2/catch.hpp>

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t's layout
#include <xxhash.h>

#include <cstddef>
#include <cstring>
#include <numeric>

using namespace kvtier;

namespace {

uint64_t total_tokens(const std::vector<cache_block>& blocks) {
  uint64_t n = 0;
  for (const auto& b : blocks)
    n += b.tokens;
  return n;
}

}  // namespace

TEST_CASE("block_hash: token blocks are chained over the parent", "[hash]") {
  std::vector<int32_t> a{1, 2, 3, 4};
  block_hash h1 = hash_token_block(0, a.data(), a.size());
  CHECK(h1 == hash_token_block(0, a.data(), a.size()));
  // Same tokens after another prefix: another block.
  CHECK(hash_token_block(h1, a.data(), a.size()) != h1);
  CHECK(hash_token_block(7, a.data(), a.size()) != hash_token_block(8, a.data(), a.size()));
  // Extra keys (e.g. an image hash overlapping the block) are part of the identity.
  uint64_t image = 42;
  CHECK(hash_token_block(0, a.data(), a.size(), &image, 1) != h1);
  std::vector<int32_t> b{1, 2, 3, 5};
  CHECK(hash_token_block(0, b.data(), b.size()) != h1);
}

TEST_CASE("block_hash: only full token blocks are hashed", "[hash]") {
  std::vector<int32_t> tokens(10);
  std::iota(tokens.begin(), tokens.end(), 0);
  std::vector<cache_block> out;
  map_token_blocks(tokens.data(), tokens.size(), 4, out);
  REQUIRE(out.size() == 2);
  CHECK(out[0].tokens == 4);
  CHECK(out[1].tokens == 4);
  // The second block chains on the first.
  CHECK(out[1].hash == hash_token_block(out[0].hash, tokens.data() + 4, 4));
  // A shared prefix gives shared hashes.
  std::vector<cache_block> other;
  std::vector<int32_t> longer = tokens;
  longer.push_back(99);
  longer.push_back(98);
  map_token_blocks(longer.data(), longer.size(), 4, other);
  REQUIRE(other.size() == 3);
  CHECK(other[0].hash == out[0].hash);
  CHECK(other[1].hash == out[1].hash);
}

TEST_CASE("block_hash: trace blocks of the cache's size map one to one", "[hash]") {
  std::vector<uint64_t> ids{0, 1, 2};
  std::vector<cache_block> out;
  map_trace_blocks(7, ids.data(), ids.size(), 1100, 512, 512, out);
  // The partial last block the trace lists (76 tokens) is no block: only full blocks are named.
  REQUIRE(out.size() == 2);
  CHECK(out[0].tokens == 512);
  CHECK(out[1].tokens == 512);
  CHECK(out[0].hash == hash_trace_block(0, 7, 0, 0));
  CHECK(out[1].hash == hash_trace_block(out[0].hash, 7, 1, 0));
  // Ids are namespaced: the same ids in another file are other blocks.
  std::vector<cache_block> elsewhere;
  map_trace_blocks(8, ids.data(), ids.size(), 1100, 512, 512, elsewhere);
  CHECK(elsewhere[0].hash != out[0].hash);
}

TEST_CASE("block_hash: large trace blocks split into whole cache blocks", "[hash]") {
  std::vector<uint64_t> a{0, 1, 2}, b{0, 1, 3};
  std::vector<cache_block> out_a, out_b;
  map_trace_blocks(1, a.data(), a.size(), 1100, 512, 64, out_a);
  map_trace_blocks(1, b.data(), b.size(), 1500, 512, 64, out_b);
  // 512 + 512 tokens give 8 + 8 sub-blocks; the 76-token tail gives one full sub-block (its
  // last 12 tokens are no block).
  REQUIRE(out_a.size() == 17);
  CHECK(out_a[16].tokens == 64);
  CHECK(total_tokens(out_a) == 1088);
  // Shared trace ids give shared sub-blocks, up to the first differing id.
  REQUIRE(out_b.size() == 8 + 8 + 7);  // the 476-token tail: 7 full sub-blocks
  for (int i = 0; i < 16; ++i)
    CHECK(out_a[i].hash == out_b[i].hash);
  CHECK(out_a[16].hash != out_b[16].hash);
  CHECK(total_tokens(out_b) == 1472);
}

TEST_CASE("block_hash: small trace blocks merge into cache blocks", "[hash]") {
  std::vector<uint64_t> ids{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  std::vector<cache_block> out;
  // 650 tokens, ten 64-token blocks listed (640 tokens; 10 tokens belong to no block).
  map_trace_blocks(3, ids.data(), ids.size(), 650, 64, 256, out);
  // A run cut short by the end of the listed blocks (128 tokens) is no block.
  REQUIRE(out.size() == 2);
  CHECK(out[0].tokens == 256);
  CHECK(out[1].tokens == 256);
  // A request that continues the same ids shares the full cache blocks.
  std::vector<uint64_t> more{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  std::vector<cache_block> longer;
  map_trace_blocks(3, more.data(), more.size(), 800, 64, 256, longer);
  REQUIRE(longer.size() == 3);
  CHECK(longer[0].hash == out[0].hash);
  CHECK(longer[1].hash == out[1].hash);
  CHECK(longer[2].tokens == 256);
}

// Found by the differential runs (tools/differential): two native files sharing the global id
// space with 2- and 4-token blocks, a 4-token cache block. Chained like single blocks, the
// merged block [3, 4] was named as the 4-token file's second block (3, then 4), a block with
// another parent, and the replay stopped on an assertion.
TEST_CASE("block_hash: a merged block is never named as a chain of single blocks", "[hash]") {
  std::vector<uint64_t> ids{3, 4, 5, 6};
  std::vector<cache_block> single, merged;
  map_trace_blocks(9, ids.data(), ids.size(), 16, 4, 4, single);
  map_trace_blocks(9, ids.data(), ids.size(), 8, 2, 4, merged);
  REQUIRE(single.size() == 4);
  REQUIRE(merged.size() == 2);
  for (const cache_block& m : merged)
    for (const cache_block& s : single)
      CHECK(m.hash != s.hash);
}

TEST_CASE("block_hash: block sizes that cannot map are refused", "[hash]") {
  CHECK_FALSE(check_block_sizes(512, 64));
  CHECK_FALSE(check_block_sizes(64, 512));
  CHECK_FALSE(check_block_sizes(64, 64));
  auto err = check_block_sizes(512, 96);
  REQUIRE(err);
  CHECK(err->find("cache.block_size=96") != std::string::npos);
  CHECK(err->find("512") != std::string::npos);
  CHECK(check_block_sizes(0, 64));
}

namespace {

// Fills the stack below the caller so that an XXH3 state placed anywhere there (64-byte aligned)
// without being initialised would read as one reset with hash_token_block's seed and no external
// secret, over a secret of garbage: xxHash 0.8 then skips deriving the secret from the seed.
[[gnu::noinline]] uint64_t stale_stack() {
  constexpr size_t words_per_line = 64 / sizeof(uint64_t);
  const size_t seed_word = offsetof(XXH3_state_t, seed) % 64 / sizeof(uint64_t);
  const size_t secret_word = offsetof(XXH3_state_t, extSecret) % 64 / sizeof(uint64_t);
  alignas(64) volatile uint64_t junk[4096];
  for (size_t i = 0; i < 4096; ++i) {
    size_t w = i % words_per_line;
    junk[i] = w == seed_word ? 0x6b76746965722d74ULL : w == secret_word ? 0 : 0xabababababababab;
  }
  return junk[7];
}

[[gnu::noinline]] block_hash hash_after_stale_stack(const std::vector<int32_t>& t) {
  stale_stack();
  return hash_token_block(0, t.data(), t.size());
}

}  // namespace

// The streamed hash of a token block equals xxHash's one-shot hash of the same bytes (parent,
// count, tokens; docs/protocol.md), which keeps no state that could be stale.
block_hash one_shot(block_hash parent, const std::vector<int32_t>& t) {
  std::vector<unsigned char> bytes(16 + t.size() * sizeof(int32_t));
  uint64_t n = t.size();
  std::memcpy(bytes.data(), &parent, 8);
  std::memcpy(bytes.data() + 8, &n, 8);
  std::memcpy(bytes.data() + 16, t.data(), t.size() * sizeof(int32_t));
  return XXH3_64bits_withSeed(bytes.data(), bytes.size(), 0x6b76746965722d74ULL);
}

TEST_CASE("block_hash: a token block's hash does not depend on what the stack held before",
          "[hash]") {
  // 64 tokens: over XXH3's 240-byte short path, where a streamed state uses its derived secret.
  std::vector<int32_t> t(64);
  std::iota(t.begin(), t.end(), 1);
  const block_hash expected = one_shot(0, t);
  CHECK(hash_token_block(0, t.data(), t.size()) == expected);
  for (int i = 0; i < 4; ++i)
    CHECK(hash_after_stale_stack(t) == expected);
}

TEST_CASE("block_hash: extra keys change every block, the first one included", "[hash]") {
  // kvtier serve mixes a request's extra keys into each of its blocks (the protocol names no
  // item positions), so a multimodal prompt shares no block with its own text prefix
  // (docs/fastdeploy.md §1).
  std::vector<int32_t> tokens(32, 7);
  const uint64_t image = 0xfeed;
  block_hash text = hash_token_block(0, tokens.data(), 16);
  block_hash with_image = hash_token_block(0, tokens.data(), 16, &image, 1);
  CHECK(text != with_image);
  CHECK(hash_token_block(text, tokens.data() + 16, 16)
        != hash_token_block(with_image, tokens.data() + 16, 16, &image, 1));
}
