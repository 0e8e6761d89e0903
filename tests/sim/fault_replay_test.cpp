// Faults with a real store during wall-clock replays: a Redis node killed and restarted, a disk
// that fills. Every request must complete, the misses and dropped writes must be counted, no read
// may return bytes that were not completely written (each payload is its block's pattern, checked
// on every read), and nothing may be left held or pending.

#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "sim/driver/replay_driver.hpp"
#include "tests/sim/verified_replay.hpp"
#include "tests/storage/redis_server.hpp"

using namespace kvtier;
using namespace kvtier::test;
namespace fs = std::filesystem;

namespace {

constexpr int requests = 120;

struct temp_dir {
  fs::path path;
  temp_dir() {
    std::string t = (fs::temp_directory_path() / "kvtier-faults-XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~temp_dir() { fs::remove_all(path); }
};

// A trace whose blocks must come back from storage: 20 prompts of 2048 tokens (32 blocks each) take
// turns, 120 requests 100 ms apart, while device and host hold 256 blocks each; so every prompt's
// next turn finds it evicted to storage (about 100 loads). 12 s of virtual time: 1.2 s at 10x.
replay_job faulty_job(const fs::path& dir, const std::vector<std::string>& sets,
                      double speed = 10) {
  fs::path trace = dir / "trace.jsonl";
  std::ofstream out(trace);
  for (int k = 0; k < requests; ++k) {
    int g = k % 20;
    out << "{\"timestamp\": " << k * 100 << ", \"input_length\": 2048, \"output_length\": 4, "
        << "\"hash_ids\": [" << g * 10 << ", " << g * 10 + 1 << ", " << g * 10 + 2 << ", "
        << g * 10 + 3 << "]}\n";
  }
  out.close();
  replay_job job;
  job.traces = {trace.string()};
  job.clock = clock_mode::wall;
  job.speed = speed;
  for (const char* s : {"cache.device_tokens=16384", "cache.host_tokens=16384",
                        "storage.capacity_tokens=400000", "storage.payload_bytes=4096"})
    job.cfg.set(s);
  for (const auto& s : sets)
    job.cfg.set(s);
  return job;
}

}  // namespace

TEST_CASE("a redis node killed in the middle of a replay and restarted", "[storage][faults][redis]") {
  temp_dir dir;
  redis_server a, b, c;
  replay_job job = faulty_job(dir.path, {"storage.backend=redis", "storage.nodes=3",
                                         "storage.redis=[\"" + a.address() + "\",\"" +
                                           b.address() + "\",\"" + c.address() + "\"]"},
                               5);
  // Down at 2.5 s of the replay's 12 virtual seconds (0.5 s of the 2.4 s it takes at 5x), back
  // at 4.5 s: the backend's redials (50, 100, 200, 400 ms apart, wall) find it again by about
  // 6.5 s, well before the end. The instants are the replay's own time, not a sleep's guess.
  constexpr int64_t down_at_ns = 2'500'000'000, up_at_ns = 4'500'000'000;
  uint64_t lost = 0;
  bool down = false, up = false;
  job.on_poll = [&](int64_t now_ns) {
    if (!down && now_ns >= down_at_ns) {
      lost = b.keys();
      b.kill();
      down = true;
    } else if (down && !up && now_ns >= up_at_ns) {
      b.start();
      up = true;
    }
  };
  replay_result result = run_replay_job(job);
  REQUIRE(down);
  REQUIRE(up);
  test::require_complete_and_verified(result, requests);
  const auto& st = result.summary["storage"];
  INFO("keys on the killed node: " << lost << "; storage: " << st.dump());
  CHECK(lost > 0);
  CHECK(st["node_downs"] == 1);
  CHECK(st["reconnects"] == 1);
  CHECK(st["puts_dropped"].get<uint64_t>() + st["misses"].get<uint64_t>() > 0);
  // The node came back empty: the reconnect's listing finds what it lost, counts it and drops it
  // from the index, so the index promises no block that redis no longer holds.
  CHECK(st["reconciles"].get<uint64_t>() >= 1);
  CHECK(st["blocks_lost"].get<uint64_t>() + st["misses"].get<uint64_t>() > 0);
  CHECK(result.summary["faults"]["outcomes"]["blocks_lost"] == st["blocks_lost"]);
  CHECK(2 * st["stored_blocks"].get<uint64_t>() <= a.keys() + b.keys() + c.keys());
  WARN("redis fault replay: " << st["blocks_lost"] << " blocks lost, " << st["puts_dropped"] << " puts dropped, " << st["misses"]
       << " misses, " << result.summary["transfers"]["failed_loads"] << " failed loads, "
       << st["node_downs"] << " node down, " << st["reconnects"] << " reconnect");
}

TEST_CASE("a disk that fills in the middle of a replay", "[storage][faults][file]") {
  temp_dir dir;
  // 200 blocks of 4 KiB (+ the 4 KiB header) per node, of the 640 the trace stores, well under the
  // pool's capacity: the disk fills before the pool would evict.
  replay_job job = faulty_job(dir.path, {"storage.backend=file", "storage.nodes=2",
                                         "storage.file_quota_bytes=1638400",
                                         "storage.file_dirs=[\"" + (dir.path / "n0").string() +
                                           "\",\"" + (dir.path / "n1").string() + "\"]"});
  replay_result result = run_replay_job(job);
  test::require_complete_and_verified(result, requests);
  const auto& st = result.summary["storage"];
  CHECK(st["puts_dropped"].get<uint64_t>() > 0);
  size_t temps = 0, blocks = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir.path)) {
    temps += e.path().filename().string().find(".tmp.") != std::string::npos;
    blocks += e.path().extension() == ".blk";
  }
  CHECK(temps == 0);
  CHECK(blocks == st["stored_blocks"].get<uint64_t>());
  WARN("full-disk replay: " << st["puts_dropped"] << " puts dropped, " << st["stored_blocks"]
       << " blocks stored");
}

TEST_CASE("the memory backend carries real bytes in virtual time without changing the replay",
          "[storage][replay]") {
  temp_dir dir;
  replay_job model = faulty_job(dir.path, {});
  model.clock = clock_mode::virtual_time;
  replay_job memory = faulty_job(dir.path, {"storage.backend=memory"});
  memory.clock = clock_mode::virtual_time;
  replay_result a = run_replay_job(model);
  replay_result b = run_replay_job(memory);
  test::require_complete_and_verified(b, requests);
  CHECK(a.summary["latency_ms"] == b.summary["latency_ms"]);
  CHECK(a.summary["transfers"] == b.summary["transfers"]);
  CHECK(a.summary["storage"]["read_service_s"] == b.summary["storage"]["read_service_s"]);
  CHECK(a.summary["storage"]["payload_bytes_read"] == 0);
  CHECK(b.summary["storage"]["payload_bytes_read"].get<uint64_t>() ==
        4096 * b.summary["transfers"]["storage_loads"].get<uint64_t>());
}
