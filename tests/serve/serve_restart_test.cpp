// kvtier serve restarted on a persistent backend (files, Redis): the index it rebuilds, and
// blocks of hashes that do not chain (serve_test.cpp says how each test runs its server).

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

namespace {

// Runs one request of `t` through the server, computed and finished, then waits until storage
// holds `blocks` blocks.
void store_prompt(client& c, uint64_t req, const std::vector<int32_t>& t, uint64_t blocks) {
  allocate_ready(c, req, t);
  REQUIRE(admitted(step_admit(c, req * 10, req, static_cast<uint32_t>(t.size()))));
  step_marks(c, req * 10 + 1, "computed", req, static_cast<uint32_t>(t.size()));
  c.call("finish", 1, [&](map_writer& w) { w.put("req", req); });
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (stat_of(c.call("stats"), "storage", "stored") < blocks
         && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(stat_of(c.call("stats"), "storage", "stored") == blocks);
}

std::string file_name_of(uint64_t hash) {
  char name[24];
  std::snprintf(name, sizeof(name), "%016llx.blk", static_cast<unsigned long long>(hash));
  return name;
}

}  // namespace

TEST_CASE("serve restarted on the file backend rebuilds its index and serves no lost block",
          "[serve]") {
  fs::path dir = fs::temp_directory_path() / ("kvtier-serve-file-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  std::vector<std::string> args = small({"--set", "storage.backend=file", "--set",
                                         "storage.file_dirs=[\"" + dir.string() + "\"]", "--set",
                                         "storage.payload_bytes=4096"});
  auto t = prompt(512, 5);  // 8 blocks
  std::vector<cache_block> blocks;
  map_token_blocks(t.data(), t.size(), 64, blocks);
  name_engine_blocks(blocks);  // the names the server stores them under
  {
    serve_process s(args);
    client c(s.endpoint());
    hello(c);
    store_prompt(c, 1, t, 8);
    CHECK(s.stop() == 0);
  }
  size_t files = 0;
  for (auto& e : fs::recursive_directory_iterator(dir))
    files += e.is_regular_file() && e.path().extension() == ".blk";
  CHECK(files == 8);
  {
    serve_process s(args);
    CHECK_THAT(s.output(), Catch::Contains("rebuilt: 8 blocks"));
    client c(s.endpoint());
    hello(c);
    reply l = c.call("lookup", 1, [&](map_writer& w) { w.put("tokens", t); });
    CHECK(l.u64("device_blocks") == 0);
    CHECK(l.u64("host_blocks") == 0);
    CHECK(l.u64("storage_blocks") == 8);
    CHECK(s.stop() == 0);
  }
  // The backend loses block 5: the rebuilt index lacks it, so only blocks 0-4 are served.
  size_t removed = 0;
  for (auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename() == file_name_of(blocks[5].hash))
      removed += fs::remove(e.path());
  REQUIRE(removed == 1);
  {
    serve_process s(args);
    CHECK_THAT(s.output(), Catch::Contains("rebuilt: 7 blocks"));
    client c(s.endpoint());
    hello(c);
    reply l = c.call("lookup", 1, [&](map_writer& w) { w.put("tokens", t); });
    CHECK(l.u64("storage_blocks") == 5);
    reply a = c.call("allocate", 2, with_tokens(1, t));
    if (a.str("state") == "pending")
      a = c.call("wait", 1, [](map_writer& w) { w.put("req", 1); });
    CHECK(a.u64("prefetched_blocks") == 5);
    reply g = step_admit(c, 1, 1, 512);
    REQUIRE(admitted(g));
    CHECK(reply::u64_in(first_admit(g), "storage_blocks") == 5);
    reply st = c.call("stats");
    CHECK(stat_of(st, "controller", "invariant_violations") == 0);
    CHECK(s.stop() == 0);
  }
  fs::remove_all(dir);
}

TEST_CASE("hashes that do not chain get blocks of their own and break nothing", "[serve]") {
  serve_process s(small());
  client c(s.endpoint());
  hello(c);
  auto run = [&](uint64_t req, std::vector<uint64_t> hashes, uint64_t step) {
    reply a = c.call("allocate", 2, [&](map_writer& w) {
      w.put("req", req);
      w.put("hashes", hashes);
    });
    if (a.str("state") == "pending")
      c.call("wait", 1, [&](map_writer& w) { w.put("req", req); });
    uint32_t tokens = static_cast<uint32_t>(hashes.size() * 64);
    reply g = step_admit(c, step, req, tokens);
    step_marks(c, step + 1, "computed", req, tokens);
    return g;
  };
  run(1, {5, 5, 5}, 1);      // one hash three times
  run(2, {1, 2}, 3);
  reply g = run(3, {3, 2}, 5);  // 2 again, under another prefix: a miss, not a hit
  CHECK(reply::u64_in(first_admit(g), "device_blocks") == 0);
  g = run(4, {1, 2, 9}, 7);   // the chain 1, 2 is found
  CHECK(reply::u64_in(first_admit(g), "device_blocks") == 2);
  for (uint64_t req : {1, 2, 3, 4})
    c.call("finish", 1, [&](map_writer& w) { w.put("req", req); });
  reply st = c.call("stats");
  CHECK(st.u64("requests") == 0);
  CHECK(stat_of(st, "controller", "invariant_violations") == 0);
  CHECK(s.stop() == 0);
}

TEST_CASE("serve restarted on the Redis backend rebuilds its index from Redis", "[serve]") {
  kvtier::test::redis_server redis;
  std::vector<std::string> args = small({"--set", "storage.backend=redis", "--set",
                                         "storage.redis=[\"" + redis.address() + "\"]", "--set",
                                         "storage.payload_bytes=4096", "--set",
                                         // the pre-start check: 10,000 x 4 KiB fit 256 MB
                                         "storage.capacity_blocks=10000"});
  auto t = prompt(512, 6);
  {
    serve_process s(args);
    client c(s.endpoint());
    hello(c);
    store_prompt(c, 1, t, 8);
    CHECK(s.stop() == 0);
  }
  serve_process s(args);
  CHECK_THAT(s.output(), Catch::Contains("rebuilt: 8 blocks"));
  client c(s.endpoint());
  hello(c);
  reply l = c.call("lookup", 1, [&](map_writer& w) { w.put("tokens", t); });
  CHECK(l.u64("storage_blocks") == 8);
  reply a = c.call("allocate", 2, with_tokens(1, t));
  if (a.str("state") == "pending")
    a = c.call("wait", 1, [](map_writer& w) { w.put("req", 1); });
  CHECK(a.u64("prefetched_blocks") == 8);
  CHECK(s.stop() == 0);
}
