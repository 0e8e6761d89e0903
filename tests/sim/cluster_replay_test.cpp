// Wall-clock replays against a real Redis Cluster (storage.backend=redis_cluster): one that runs
// through, and one whose cluster loses a master mid-replay and fails over to its replica. Every
// request completes, no read returns bytes that were not completely written (each payload is its
// block's pattern, checked on every read), and the index promises no block the cluster lost.

#include <filesystem>
#include <fstream>

#include <catch2/catch.hpp>

#include "sim/driver/replay_driver.hpp"
#include "tests/sim/verified_replay.hpp"
#include "tests/storage/redis_cluster_servers.hpp"

using namespace kvtier;
using namespace kvtier::test;
namespace fs = std::filesystem;

namespace {

constexpr int requests = 120;

struct temp_dir {
  fs::path path;
  temp_dir() {
    std::string t = (fs::temp_directory_path() / "kvtier-cluster-replay-XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~temp_dir() { fs::remove_all(path); }
};

// 20 prompts of 2048 tokens take turns, 120 requests 100 ms apart, while device and host hold 256
// blocks each: every prompt's next turn comes back from storage (as fault_replay_test.cpp's).
replay_job cluster_job(const fs::path& dir, const redis_cluster_servers& cluster, double speed) {
  fs::path trace = dir / "trace.jsonl";
  std::ofstream out(trace);
  for (int k = 0; k < requests; ++k) {
    int g = k % 20;
    out << "{\"timestamp\": " << k * 100 << ", \"input_length\": 2048, \"output_length\": 4, "
        << "\"hash_ids\": [" << g * 10 << ", " << g * 10 + 1 << ", " << g * 10 + 2 << ", "
        << g * 10 + 3 << "]}\n";
  }
  out.close();
  std::string seeds;
  for (const std::string& s : cluster.seeds())
    seeds += (seeds.empty() ? "\"" : ",\"") + s + "\"";
  replay_job job;
  job.traces = {trace.string()};
  job.clock = clock_mode::wall;
  job.speed = speed;
  for (const std::string& s :
       {std::string("cache.device_tokens=16384"), std::string("cache.host_tokens=16384"),
        std::string("storage.capacity_tokens=400000"), std::string("storage.payload_bytes=4096"),
        std::string("storage.backend=redis_cluster"), "storage.redis_cluster=[" + seeds + "]"})
    job.cfg.set(s);
  return job;
}

}  // namespace

TEST_CASE("a replay against a three-master redis cluster", "[storage][redis][cluster]") {
  temp_dir dir;
  redis_cluster_servers cluster(3, 0);
  replay_result result = run_replay_job(cluster_job(dir.path, cluster, 10));
  test::require_complete_and_verified(result, requests);
  const auto& st = result.summary["storage"];
  INFO(st.dump());
  CHECK(st["puts_dropped"] == 0);
  CHECK(st["misses"] == 0);
  CHECK(st["node_downs"] == 0);
  // The cluster holds exactly what the index promises, two keys per block, on its masters.
  CHECK(2 * st["stored_blocks"].get<uint64_t>() == cluster.master_keys());
}

TEST_CASE("a redis cluster master killed in the middle of a replay fails over",
          "[storage][redis][cluster][faults]") {
  temp_dir dir;
  redis_cluster_servers cluster(3, 1);
  replay_job job = cluster_job(dir.path, cluster, 2);
  // At 0.5 s of the replay's 12 virtual seconds the first master's replica hangs and the master
  // drops its link, so what the master takes from then on is never replicated; the master is
  // killed at 2.5 s (1.25 s wall at 2x) and the replica resumes. The cluster notices within its
  // 1 s node timeout and promotes the replica a second or two later, well before the replay's
  // 6 s end, without the blocks written in between. The instants are the replay's own time, not
  // a sleep's guess.
  constexpr int64_t pause_at_ns = 500'000'000, kill_at_ns = 2'500'000'000;
  size_t master = 0;
  while (!redis_cluster_servers::is_master(cluster.node(master)))
    ++master;
  size_t replica = cluster.replica_of(master);
  REQUIRE(replica != SIZE_MAX);
  bool paused = false, killed = false;
  job.on_poll = [&](int64_t now_ns) {
    if (!paused && now_ns >= pause_at_ns) {
      cluster.node(replica).pause();
      cluster.node(master).command({"CLIENT", "KILL", "TYPE", "replica"});
      paused = true;
    } else if (paused && !killed && now_ns >= kill_at_ns) {
      cluster.node(master).kill();
      cluster.node(replica).resume();
      killed = true;
    }
  };
  replay_result result = run_replay_job(job);
  REQUIRE(killed);

  test::require_complete_and_verified(result, requests);
  const auto& st = result.summary["storage"];
  INFO(st.dump());
  CHECK(st["node_downs"].get<uint64_t>() >= 1);
  CHECK(st["reconnects"].get<uint64_t>() >= 1);
  // The failover's recovery reconciles the index with the cluster: what the old master took with
  // it (written, never replicated) is counted and leaves the index, so none is served.
  CHECK(st["reconciles"].get<uint64_t>() >= 1);
  CHECK(st["blocks_lost"].get<uint64_t>() > 0);
  CHECK(result.summary["faults"]["outcomes"]["blocks_lost"] == st["blocks_lost"]);
  CHECK(2 * st["stored_blocks"].get<uint64_t>() <= cluster.master_keys());
  WARN("redis cluster failover replay: " << st["blocks_lost"] << " blocks lost, "
       << st["puts_dropped"] << " puts dropped, " << st["misses"] << " misses, "
       << st["node_downs"] << " node downs, " << st["reconnects"] << " reconnects");
}

namespace {

// 480 requests 100 ms apart over 48 s of wall time: each takes one of 60 prompts (two trace
// blocks, 16 cache blocks) and adds a block of its own, so a pool of 200 blocks evicts, deletes and
// is read all through the run.
replay_job churning_job(const fs::path& dir, const redis_cluster_servers& cluster) {
  fs::path trace = dir / "trace.jsonl";
  std::ofstream out(trace);
  for (int k = 0; k < 480; ++k) {
    int g = (k * 7) % 60;
    out << "{\"timestamp\": " << k * 100 << ", \"input_length\": 1536, \"output_length\": 2, "
        << "\"hash_ids\": [" << g * 2 << ", " << g * 2 + 1 << ", " << 100000 + k << "]}\n";
  }
  out.close();
  std::string seeds;
  for (const std::string& s : cluster.seeds())
    seeds += (seeds.empty() ? "\"" : ",\"") + s + "\"";
  replay_job job;
  job.traces = {trace.string()};
  job.clock = clock_mode::wall;
  job.speed = 1;
  for (const std::string& s :
       {std::string("cache.device_tokens=8192"), std::string("cache.host_tokens=8192"),
        std::string("storage.capacity_blocks=200"), std::string("storage.payload_bytes=4096"),
        std::string("storage.backend=redis_cluster"), "storage.redis_cluster=[" + seeds + "]"})
    job.cfg.set(s);
  return job;
}

}  // namespace

// Redis's default cluster-node-timeout (15 s) and a failover wait shorter than the failover
// (storage.redis_failover_wait_s=4): the commands held up by the dead master fail, deletes
// among them. They are owed and retried once the replica serves, and the reconcile after the
// failover deletes what the index no longer holds and drops what the cluster lost: afterwards the
// masters hold exactly the index's blocks, within the capacity. (About 50 s: the failover itself
// takes Redis 16 to 18 s.)
TEST_CASE("a failover slower than the wait leaves nothing orphaned: keys = index <= capacity",
          "[storage][redis][cluster][faults][slow]") {
  temp_dir dir;
  redis_cluster_servers cluster(3, 1, "256mb", 15'000);
  replay_job job = churning_job(dir.path, cluster);
  job.cfg.set("storage.redis_failover_wait_s=4");
  size_t master = 0;
  while (!redis_cluster_servers::is_master(cluster.node(master)))
    ++master;
  bool killed = false;
  job.on_poll = [&](int64_t now_ns) {
    if (!killed && now_ns >= 6'000'000'000) {
      cluster.node(master).kill();
      killed = true;
    }
  };
  replay_result result = run_replay_job(job);
  REQUIRE(killed);
  const auto& s = result.summary;
  const auto& st = s["storage"];
  INFO(st.dump());
  CHECK(s["requests"]["unfinished"] == 0);
  CHECK(st["corrupt"] == 0);
  CHECK(st["payload_errors"] == 0);
  CHECK(result.invariant_violations == 0);
  CHECK(st["reconnects"].get<uint64_t>() >= 1);
  CHECK(st["deletes"]["failed"].get<uint64_t>() > 0);
  CHECK(st["deletes"]["retried"].get<uint64_t>() + st["deletes"]["orphans_removed"].get<uint64_t>() > 0);
  CHECK(st["deletes"]["owed"] == 0);
  CHECK(cluster.master_keys() == 2 * st["stored_blocks"].get<uint64_t>());
  CHECK(st["stored_blocks"].get<uint64_t>() <= 200);
  WARN("15 s failover: " << st["deletes"].dump() << ", " << st["blocks_lost"] << " blocks lost, "
       << st["puts_dropped"] << " puts dropped");
}
