// kvtier serve in real mode (tensors, protocol version 2) and the options it refuses
// (serve_test.cpp says how each test runs its server).

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "tests/serve/serve_calls.hpp"
#include "tests/serve/serve_process.hpp"

namespace fs = std::filesystem;
using namespace kvtier;
using namespace kvtier::serve;
using namespace kvtier::test::serve_calls;
using kvtier::test::serve_process;

TEST_CASE("real mode: a modelled server refuses tensors clearly and negotiates version 2",
          "[serve]") {
  serve_process s(small());
  // versions [1, 2]: the highest common one; version 2's hello reply says nothing is attached.
  client a(s.endpoint());
  reply r = a.call("hello", 4, [](map_writer& w) {
    w.key("versions").pack(std::vector<uint32_t>{1, 2});
    w.put_str("name", "v2");
    w.put("block_size", 64);
    put_default_model(w);
  });
  CHECK(r.u64("version") == 2);
  a.set_engine(r.u64("engine"));
  CHECK_FALSE(r.flag("attached"));
  CHECK_FALSE(r.flag("verify"));
  // A version-1 engine gets the version-1 reply.
  client one(s.endpoint());
  reply r1 = one.hello("v1", shape(32, "bf16"), 64);
  CHECK(r1.u64("version") == 1);
  CHECK(r1.find("attached") == nullptr);
  // An engine exporting its tensors: refused with what to do.
  attach_request t;
  t.present = true;
  t.device_blocks = 16;
  t.layer_handles.assign(32, ipc_bytes{});
  t.layer_offsets.assign(32, 0);
  t.event_slots = 1;
  t.events.assign(32, ipc_bytes{});
  client b(s.endpoint());
  try {
    b.hello("real", shape(32, "bf16"), 64, &t);
    FAIL("a modelled server accepted an engine's tensors");
  } catch (const remote_error& e) {
    CHECK(e.kind == "bad_request");
    CHECK_THAT(e.what(), Catch::Contains("this server models the device"));
    CHECK_THAT(e.what(), Catch::Contains("--backend cuda"));
  }
  // bench_swap needs an attached engine.
  uint64_t id = a.send("bench_swap", 1, [](map_writer& w) { w.put("blocks", 4); });
  CHECK_THAT(error_of(a, id), Catch::Contains("bad_request: bench_swap needs an attached engine"));
  // The server goes on; once it has taken an allocate, bench_swap is refused for that first.
  CHECK(allocate_ready(a, 1, prompt(128, 1)).u64("prefetched_blocks") == 0);
  CHECK(a.call("stats").u64("engines") == 2);
  id = a.send("bench_swap", 1, [](map_writer& w) { w.put("blocks", 4); });
  CHECK_THAT(error_of(a, id), Catch::Contains("runs only before the server's first allocate"));
  CHECK(s.stop() == 0);
}

TEST_CASE("real mode options are refused where they cannot work", "[serve]") {
  auto code = [](const std::string& args) {
    int status = std::system((std::string(KVTIER_BINARY) + " " + args + " > /dev/null 2>&1")
                               .c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  CHECK(code("serve --verify --bind tcp://127.0.0.1:1") == 2);
  CHECK(code("engine-sim --verify --connect tcp://127.0.0.1:1") == 2);
  CHECK(code("engine-sim --swap-bench 4 --connect tcp://127.0.0.1:1") == 2);
  if (!gpu::cuda_built()) {
    // The build without CUDA refuses real mode by its option, as bad input.
    CHECK(code("serve --backend cuda --bind tcp://127.0.0.1:1") == 2);
    CHECK(code("engine-sim --backend cuda --connect tcp://127.0.0.1:1") == 2);
  }
  // A storage tier without bytes would load stale host bytes into the engine's KV on a hit.
  REQUIRE_THROWS_WITH(serve_process({"--backend", "shm", "--set",
                                     "storage.capacity_tokens=100000"}),
                      Catch::Contains("exited 2") && Catch::Contains("storage.backend=model"));
}
