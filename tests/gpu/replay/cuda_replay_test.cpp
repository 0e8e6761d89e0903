// The real backend through the four actors, on the wall clock: swap-ins, backups and a storage
// round trip with every block checked against its pattern (--verify). Skipped, visibly, without
// a CUDA device.

#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "gpu/device_info.hpp"
#include "tests/gpu/test_shapes.hpp"
#include "tests/sim/scenario.hpp"

using namespace kvtier;
using namespace kvtier::test;

TEST_CASE("cuda replay: blocks survive every tier on the real backend, verified",
          "[gpu][replay]") {
  // 16-token blocks of 4 layers x 1 head x 4 dims in bf16: 1024 bytes, as small_config says.
  deployment_plan c = small_config(10, 12);
  instance_of(c).cache.storage_tier = true;
  instance_of(c).cache.storage = storage_write::always;
  instance_of(c).controller.storage = true;
  c.storage.pool.capacity_blocks = 64;
  instance_of(c).scheduler.compute.prefill_token_ns = 2000;
  c.backend = copy_backend_kind::cuda;
  c.cuda.shape = gpu::test::kv_of(4, 1, 4, 2);
  c.cuda.block_size = 16;
  c.cuda.device_blocks = 10;
  c.cuda.host_blocks = 12;
  c.cuda.verify = true;
  instance_of(c).controller.grant_early = true;
  instance_of(c).controller.verify = true;
  instance_of(c).controller.log = true;
  // Three conversations of two turns: the host (12 blocks) cannot keep everything, so the
  // second turns find their first turns partly in host memory and partly only in storage.
  std::vector<trace_request> reqs;
  uint64_t seq = 0;
  for (uint64_t turn = 0; turn < 2; ++turn)
    for (uint64_t conv = 0; conv < 3; ++conv) {
      std::vector<uint64_t> ids;
      for (uint64_t k = 0; k < 4 + 2 * turn; ++k)
        ids.push_back(conv * 100 + k);
      reqs.push_back(request(seq, static_cast<int64_t>(seq) * 30'000'000, ids, 2));
      ++seq;
    }
  full_run_options wall;
  wall.mode = clock_mode::wall;
  full_result r = run_scenario(c, reqs, wall);
  INFO((r.controller.invariant_messages.empty() ? std::string{}
                                                : r.controller.invariant_messages.front()));
  REQUIRE(r.controller.invariant_violations == 0);
  REQUIRE(r.drained);
  CHECK(r.engine.backend == "cuda");
  CHECK(r.engine.failed == 0);
  CHECK(r.controller.swap_ins > 0);  // checked on the device after landing
  CHECK(r.controller.loads > 0);     // read back from storage and checked in host memory
  CHECK(r.controller.stores > 0);
  CHECK(r.controller.backups > 0);
  uint64_t second_turn_hits = 0;
  for (const auto& x : r.scheduler.requests)
    if (x.req >= 3)
      second_turn_hits += x.hit_blocks[1] + x.hit_blocks[2];
  CHECK(second_turn_hits > 0);
  for (const transfer_log& l : r.engine.log)
    if (l.kind == transfer_kind::swap_in)
      CHECK(l.duration_ns > 0);
}

int main(int argc, char** argv) {
  gpu::device_info info = gpu::query_device(0);
  if (!info.available) {
    std::printf("skipped: no CUDA device (%s)\n", info.reason.c_str());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
