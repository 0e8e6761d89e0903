#include "gpu/memory_fit.hpp"

#include <catch2/catch.hpp>

using namespace kvtier::gpu;

namespace {
constexpr uint64_t gib = 1ull << 30;
}

TEST_CASE("memory fit: the default instance is refused on an H100, naming the key") {
  // 800,000 device tokens of 128 KiB (docs/gpu.md "GPU profiles") against 79 GiB free.
  memory_ask ask{800000ull * 128 * 1024, 3200000ull * 128 * 1024};
  memory_free h100{79 * gib, 120 * gib};
  auto why = memory_refusal(ask, h100);
  REQUIRE(why);
  CHECK(why->find("97.7 GiB of GPU memory") != std::string::npos);
  CHECK(why->find("lower cache.device_tokens") != std::string::npos);
  CHECK(why->find("configs/h100-80gb.json") != std::string::npos);
}

TEST_CASE("memory fit: a host pool over the available memory is refused, near it warns") {
  memory_ask h100_profile{39 * gib + gib / 10, 78 * gib + gib / 8};
  CHECK_FALSE(memory_refusal(h100_profile, {79 * gib, 120 * gib}));
  CHECK_FALSE(memory_warning(h100_profile, {79 * gib, 120 * gib}));
  auto why = memory_refusal(h100_profile, {79 * gib, 64 * gib});
  REQUIRE(why);
  CHECK(why->find("lower cache.host_tokens") != std::string::npos);
  auto warn = memory_warning(h100_profile, {79 * gib, 80 * gib});
  REQUIRE(warn);
  CHECK(warn->find("cache.host_tokens") != std::string::npos);
  // Unknown host memory (no /proc/meminfo): nothing is said about the host.
  CHECK_FALSE(memory_refusal(h100_profile, {79 * gib, 0}));
  CHECK_FALSE(memory_warning(h100_profile, {79 * gib, 0}));
}

TEST_CASE("memory fit: this host's available memory reads as a plausible number") {
  uint64_t avail = host_available_bytes();
  CHECK(avail > 0);
  CHECK(avail < (1ull << 50));
}
