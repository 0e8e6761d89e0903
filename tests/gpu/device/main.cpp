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
  Catch::Session session;
  auto& b = kvtier::gpu::test::bench_settings();
  using Catch::clara::Opt;
  session.cli(session.cli()
              | Opt(b.transfer_bytes, "bytes")["--bench-bytes"]("[.bench] bytes per transfer")
              | Opt(b.repetitions, "n")["--bench-reps"]("[.bench] timed repetitions")
              | Opt(b.no_verify)["--bench-no-verify"]("[.bench] skip byte checks")
              | Opt(b.out_dir, "dir")["--bench-out"]("[.bench] write JSON files here")
              | Opt(b.block_sizes, "list")["--bench-block-sizes"]("[.bench] e.g. 16,64")
              | Opt(b.slot_bytes, "bytes")["--bench-slot-bytes"]("[.bench] staging slot size")
              | Opt(b.slots, "n")["--bench-slots"]("[.bench] staging slots per direction")
              | Opt(b.direct_min_bytes, "bytes")["--bench-direct-min"]("[.bench] direct runs")
              | Opt(b.zero_copy_ctas, "n")["--bench-zero-copy-ctas"]("[.bench] CTAs"));
  int rc = session.applyCommandLine(argc, argv);
  if (rc != 0)
    return rc;
  return session.run();
}
