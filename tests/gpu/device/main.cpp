// The device tests' entry point: without a usable CUDA device they are skipped, visibly and with
// exit code 77 (ctest's SKIP_RETURN_CODE), never reported as passed.

#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "support.hpp"

int main(int argc, char** argv) {
  kvtier::gpu::device_info info = kvtier::gpu::query_device(0);
  if (!info.available) {
    std::printf("skipped: no CUDA device (%s)\n", info.reason.c_str());
    return 77;
  }
  std::printf("device: %s\n", kvtier::gpu::describe(info).c_str());
  return Catch::Session().run(argc, argv);
}
