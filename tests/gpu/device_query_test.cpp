// Runs everywhere: without a device, the backend must say why instead of failing obscurely.

#include <catch2/catch.hpp>

#include "gpu/kv_cache.hpp"
#include "gpu/bench/transfer_bench.hpp"
#include "test_shapes.hpp"

using namespace kvtier::gpu;

TEST_CASE("device query: never throws, and explains a missing device", "[gpu][device]") {
  device_info info = query_device(0);
  if (info.available) {
    CHECK_FALSE(info.name.empty());
    CHECK(info.sm_count > 0);
    return;
  }
  CHECK_FALSE(info.reason.empty());
  CHECK(describe(info) == "no CUDA device: " + info.reason);
#if !KVTIER_HAVE_CUDA
  CHECK(info.reason == "built without CUDA");
#endif
  kv_cache_config cfg;
  cfg.device_blocks = 4;
  cfg.host_blocks = 4;
  try {
    make_kv_cache(cfg);
    FAIL("make_kv_cache succeeded without a device");
  } catch (const gpu_error& e) {
    CHECK(std::string(e.what())
          == "cannot create the GPU KV cache: no CUDA device: " + info.reason);
  }
  CHECK_THROWS_AS(run_transfer_bench(bench_options{}), gpu_error);
}

TEST_CASE("device query: a device that is not there", "[gpu][device]") {
  device_info info = query_device(4096);
  CHECK_FALSE(info.available);
  CHECK_FALSE(info.reason.empty());
}

TEST_CASE("cache creation: a bad shape is named before any device work", "[gpu][device]") {
  kv_cache_config cfg;
  cfg.shape = test::kv_of(2, 1, 3, 2);
  cfg.block_size = 1;  // 6-byte chunks
  cfg.device_blocks = 4;
  CHECK_THROWS_WITH(make_kv_cache(cfg), Catch::Contains("multiple of 16"));
  cfg.shape = llama3_8b_kv();
  cfg.block_size = 16;
  cfg.device_blocks = 0;
  CHECK_THROWS_WITH(make_kv_cache(cfg), Catch::Contains("at least one device block"));
}

TEST_CASE("transfer methods: names round trip, staging is the default", "[gpu][device]") {
  for (transfer_method m : {transfer_method::automatic, transfer_method::per_chunk,
                            transfer_method::batched, transfer_method::staging,
                            transfer_method::zero_copy})
    CHECK(parse_transfer_method(to_string(m)) == m);
  CHECK_FALSE(parse_transfer_method("memcpy"));
  CHECK(default_method(transfer_direction::h2d) == transfer_method::staging);
  CHECK(default_method(transfer_direction::d2h) == transfer_method::staging);
}
