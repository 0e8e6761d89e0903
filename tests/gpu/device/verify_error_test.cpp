// Verification finds and names wrong bytes; bad requests fail with clear errors and leave the
// cache usable.

#include <catch2/catch.hpp>

#include "support.hpp"

using namespace kvtier::gpu;
using namespace kvtier::gpu::test;

TEST_CASE("verify: a wrong hash and a corrupted layer are named", "[gpu][verify]") {
  kv_layout shape = small_shape();
  auto cache = make_kv_cache(make_config(shape, 16, 8));
  kv_cache& c = *cache;
  c.fill_device_blocks({{3, 11}, {5, 7}});
  CHECK_FALSE(c.check_device_blocks({{3, 11}, {5, 7}}));
  auto wrong = c.check_device_blocks({{5, 7}, {3, 12}});
  REQUIRE(wrong);
  CHECK(wrong->on_device);
  CHECK(wrong->block == 3);
  CHECK(wrong->layer == 0);
  CHECK(wrong->half == kv_half::key);
  CHECK(wrong->byte_offset == 0);
  CHECK(wrong->hash == 12);
  CHECK(wrong->expected == pattern_word(chunk_seed(12, 0, kv_half::key), 0));
  CHECK(wrong->found == pattern_word(chunk_seed(11, 0, kv_half::key), 0));

  // Device block 5 -> host block 2, one byte of layer 2's V flipped there, back to device 6.
  c.release(c.submit_d2h({{5, 2}}));
  CHECK_FALSE(check_host_block(c.host_block(2), shape, 7, 2));
  uint64_t at = 2 * shape.slice_bytes() + shape.chunk_bytes() + 1000;
  c.host_block(2)[at] ^= std::byte{1};
  auto on_host = check_host_block(c.host_block(2), shape, 7, 2);
  REQUIRE(on_host);
  CHECK(on_host->layer == 2);
  CHECK(on_host->half == kv_half::value);
  CHECK(on_host->byte_offset == 1000);
  c.release(c.submit_h2d({{6, 2}}));
  auto on_device = c.check_device_blocks({{6, 7}});
  REQUIRE(on_device);
  CHECK(to_string(*on_device).rfind("verify: device block 6, layer 2 V, byte 1000:", 0) == 0);
}

TEST_CASE("verify: a destination the transfer missed keeps its poison", "[gpu][verify]") {
  auto cache = make_kv_cache(make_config(small_shape(), 16, 8));
  kv_cache& c = *cache;
  fill_every_host_block(c);
  c.poison_device_blocks({4, 9}, 0xa5);
  c.synchronize();
  c.release(c.submit_h2d({{4, 1}}));
  CHECK_FALSE(c.check_device_blocks({{4, host_hash(1)}}));
  auto missed = c.check_device_blocks({{9, host_hash(2)}});
  REQUIRE(missed);
  CHECK(missed->block == 9);
  CHECK(missed->found == 0xa5a5a5a5a5a5a5a5ull);
}

TEST_CASE("errors: bad requests are refused with the reason", "[gpu][errors]") {
  auto cache = make_kv_cache(make_config(small_shape(), 16, 8));
  kv_cache& c = *cache;
  CHECK_THROWS_WITH(c.submit_h2d({{1, 1}, {999, 2}}),
                    "h2d transfer rejected: device block 999 is out of range [0, 16)");
  CHECK_THROWS_WITH(c.submit_d2h({{1, 8}}),
                    "d2h transfer rejected: host block 8 is out of range [0, 8)");
  CHECK_THROWS_WITH(c.submit_h2d({{1, 1}, {1, 2}}),
                    Catch::Contains("device block 1 is the destination of more than one pair"));
  CHECK_THROWS_WITH(c.wait(12345), "unknown op 12345: never submitted, or released");
  CHECK_THROWS_WITH(c.submit_bulk(transfer_direction::h2d, c.layout().host_bytes() + 1),
                    Catch::Contains("does not fit"));
  CHECK_THROWS_WITH(c.fill_device_blocks({{16, 1}}), Catch::Contains("device block 16"));
  CHECK_THROWS_WITH(c.host_block(8), Catch::Contains("host block 8"));
  op_id h2d = c.submit_h2d({{2, 3}});
  CHECK_THROWS_WITH(c.layer_done(h2d, 4), Catch::Contains("has no layer 4"));
  c.release(h2d);
  // Nothing of the refused requests was queued: the cache still works.
  fill_every_host_block(c);
  fill_every_device_block(c);
  auto pairs = scattered_pairs(5, 6, c.layout(), false);
  c.release(c.submit_h2d(pairs));
  CHECK(check_devices_after_h2d(c, pairs) == "");
}

TEST_CASE("errors: tiers larger than the GPU are refused before anything is allocated",
          "[gpu][errors]") {
  // Before the memory check this reached cudaMalloc, which failed after the pinning; now the
  // cache refuses up front and names the key (gpu/memory_fit.hpp).
  kv_cache_config cfg = make_config(llama_shape(64), 1u << 22, 4);  // 32 TiB of device blocks
  try {
    make_kv_cache(cfg);
    FAIL("a 32 TiB allocation succeeded");
  } catch (const gpu_error& e) {
    std::string what = e.what();
    INFO(what);
    CHECK(what.rfind("the device tier needs 32768.1 GiB of GPU memory", 0) == 0);
    CHECK(what.find("lower cache.device_tokens") != std::string::npos);
  }
}
