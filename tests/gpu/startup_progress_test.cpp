#include "gpu/startup_progress.hpp"

#include <catch2/catch.hpp>

#include <thread>
#include <vector>

using namespace kvtier::gpu;

TEST_CASE("start-up progress: each phase is said as it starts and ends, and timed") {
  std::vector<std::string> lines;
  startup_progress p([&](const std::string& l) { lines.push_back(l); });
  p.begin(startup_phase::host_pinning, "pinning 1.0 GiB of host KV blocks (4 threads)");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  p.end();
  p.say("warning: tight");
  p.begin(startup_phase::device_memory, "allocating 2.0 GiB of device KV tensors");
  p.end();
  startup_timing t = p.finish();
  REQUIRE(lines.size() == 5);
  CHECK(lines[0] == "pinning 1.0 GiB of host KV blocks (4 threads) ...");
  CHECK(lines[1].rfind("pinning 1.0 GiB of host KV blocks (4 threads): done in 0.0", 0) == 0);
  CHECK(lines[2] == "warning: tight");
  CHECK(t.host_pinning_s >= 0.02);
  CHECK(t.device_memory_s < t.host_pinning_s);
  CHECK(t.compute_calibration_s == 0);
  CHECK(t.total_s >= t.host_pinning_s + t.device_memory_s);
  startup_progress quiet(nullptr);  // no sink: timed, silent
  quiet.begin(startup_phase::compute_calibration, "x");
  quiet.end();
  CHECK(quiet.finish().total_s >= 0);
}

TEST_CASE("start-up progress: pages touched in parallel cover the whole range, zeroed") {
  uint64_t bytes = (3ull << 20) + 12345;  // not a multiple of the threads' share or a page
  std::byte* p = map_touched_pages(bytes, 7);
  REQUIRE(p != nullptr);
  bool zero = true;
  for (uint64_t i = 0; i < bytes; i += 511)
    zero = zero && p[i] == std::byte{0};
  CHECK(zero);
  CHECK(p[bytes - 1] == std::byte{0});
  p[bytes - 1] = std::byte{7};  // writable to the last byte
  unmap_pages(p, bytes);
  CHECK(touch_threads() >= 1);
  CHECK(touch_threads() <= 16);
}
