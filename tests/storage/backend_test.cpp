#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>

#include <catch2/catch.hpp>

#include "storage/file_backend.hpp"
#include "storage/memory_backend.hpp"
#include "storage/payload_pattern.hpp"
#include "storage/redis_backend.hpp"
#include "storage/redis_cluster_backend.hpp"
#include "tests/storage/backend_calls.hpp"
#include "tests/storage/redis_cluster_servers.hpp"
#include "tests/storage/redis_server.hpp"

using namespace kvtier;
using namespace kvtier::test;
namespace fs = std::filesystem;

namespace {

// Blocks whose keys put them on node `node` of 3 (the routing uses the key's high bits).
block_ref block_on(uint32_t node, uint64_t i) {
  return {(uint64_t{node} << 32) | i, 0x1000 + node * 100 + i};
}

struct temp_dir {
  fs::path path;
  temp_dir() {
    std::string t = (fs::temp_directory_path() / "kvtier-backend-XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~temp_dir() { fs::remove_all(path); }
};

size_t files_under(const fs::path& p, const std::string& containing) {
  size_t n = 0;
  for (const auto& e : fs::recursive_directory_iterator(p))
    n += e.is_regular_file() && e.path().filename().string().find(containing) != std::string::npos;
  return n;
}

// The contract every backend keeps: what a put stored comes back byte for byte, exists agrees,
// a removed block is gone, list names exactly the stored blocks.
void round_trip(storage_backend& b) {
  std::vector<block_ref> blocks = {block_on(0, 1), block_on(1, 2), block_on(2, 3), block_on(0, 4)};
  std::vector<block_bytes_t> payloads;
  for (size_t i = 0; i < blocks.size(); ++i)
    payloads.push_back(pattern_payload(blocks[i].hash, 1000 + 4096 * i));  // odd sizes too
  CHECK(exists_now(b, blocks) == std::vector<bool>{false, false, false, false});
  CHECK(put_now(b, blocks, payloads) == std::vector<bool>{true, true, true, true});
  CHECK(exists_now(b, blocks) == std::vector<bool>{true, true, true, true});
  std::vector<uint64_t> sizes;
  for (const auto& p : payloads)
    sizes.push_back(p.size());
  auto got = get_now(b, blocks, sizes);
  REQUIRE(got.size() == 4);
  for (size_t i = 0; i < blocks.size(); ++i) {
    REQUIRE(got[i].has_value());
    CHECK(check_pattern_payload(blocks[i].hash, payloads[i].size(), *got[i]) == "");
  }
  CHECK(remove_now(b, {blocks[1]}) == std::vector<bool>{true});
  CHECK(exists_now(b, blocks) == std::vector<bool>{true, false, true, true});
  // A block that is not there is gone too: its delete is done, not owed.
  CHECK(remove_now(b, {blocks[1], block_on(2, 99)}) == std::vector<bool>{true, true});
  CHECK_FALSE(get_now(b, {blocks[1]}, sizes[1])[0].has_value());
  std::vector<uint64_t> kept = {blocks[0].hash, blocks[2].hash, blocks[3].hash};
  std::sort(kept.begin(), kept.end());
  block_listing listing = listing_now(b);
  CHECK(listing.blocks == kept);
  CHECK(listing.partial.empty());
  CHECK(listing.complete());
  CHECK(listing.listed.size() == b.nodes());
  backend_counters c = b.counters();
  CHECK(c.puts_ok == 4);
  CHECK(c.gets_hit == 4);
  CHECK(c.gets_missed == 1);
  CHECK(c.removed == 1);
  CHECK(c.corrupt == 0);
  // A get reads into the caller's memory, which must be the block's length exactly: a longer or
  // shorter destination is a miss, counted, whatever part of the bytes landed there.
  CHECK_FALSE(get_now(b, {blocks[3]}, sizes[3] + 1)[0].has_value());
  CHECK_FALSE(get_now(b, {blocks[3]}, sizes[3] - 1)[0].has_value());
  CHECK(b.counters().corrupt == 2);
  CHECK(b.counters().gets_missed == 3);
  CHECK(check_pattern_payload(blocks[3].hash, sizes[3], *get_now(b, {blocks[3]}, sizes[3])[0]) == "");
}

backend_options options(const std::string& kind) {
  backend_options o;
  o.kind = *parse_storage_backend_kind(kind);
  o.ns = {"test-model", "bf16"};
  o.nodes = 3;
  return o;
}

}  // namespace

TEST_CASE("block names carry model, dtype and hash, and parse back", "[storage][backend]") {
  block_namespace ns{"llama3-8b", "bf16"};
  CHECK(block_name(ns, 0xabc) == "kvtier:llama3-8b:bf16:0000000000000abc");
  CHECK(hash_of_block_name(ns, "kvtier:llama3-8b:bf16:0000000000000abc:k") == 0xabcu);
  CHECK_FALSE(hash_of_block_name(ns, "kvtier:llama3-8b:fp8:0000000000000abc").has_value());
  CHECK_FALSE(hash_of_block_name(ns, "kvtier:llama3-8b:bf16:00000000000zzabc").has_value());
}

TEST_CASE("memory backend keeps what it stored", "[storage][backend]") {
  memory_backend b(3);
  round_trip(b);
}

TEST_CASE("file backend keeps what it stored, one file per block, nothing torn",
          "[storage][backend]") {
  temp_dir dir;
  backend_options o = options("file");
  for (int n = 0; n < 3; ++n)
    o.file_dirs.push_back((dir.path / ("node" + std::to_string(n))).string());
  {
    file_backend b(o);
    round_trip(b);
    CHECK(files_under(dir.path, ".blk") == 3);
    CHECK(files_under(dir.path, ".tmp.") == 0);
  }
  SECTION("a restarted backend finds the blocks and removes leftover temporary files") {
    std::ofstream(o.file_dirs[0] + "/kvtier/test-model/bf16/0000000000001001.blk.tmp.1.1") << "x";
    file_backend again(o);
    CHECK(files_under(dir.path, ".tmp.") == 0);
    CHECK(list_now(again).size() == 3);
    CHECK(again.used_bytes(0) > 0);
  }
  SECTION("a block file cut short reads as a miss, never as data") {
    file_backend b(o);
    block_ref r = block_on(0, 1);
    std::string path = o.file_dirs[0] + "/kvtier/test-model/bf16/0000000000001001.blk";
    REQUIRE(::truncate(path.c_str(), 4096 + 500) == 0);
    CHECK_FALSE(get_now(b, {r}, 1000)[0].has_value());
    // damaged in place, same length: the checksum catches it
    block_ref r4 = block_on(0, 4);
    std::string path4 = o.file_dirs[0] + "/kvtier/test-model/bf16/0000000000001004.blk";
    {
      std::fstream f(path4, std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(4096 + 10);
      char c = static_cast<char>(f.get());
      f.seekp(4096 + 10);
      f.put(static_cast<char>(c ^ 0xff));
    }
    CHECK_FALSE(get_now(b, {r4}, 1000 + 4096 * 3)[0].has_value());
    CHECK(b.counters().corrupt == 2);
  }
}

TEST_CASE("file backend: a full disk fails the write, leaves nothing half written",
          "[storage][backend][faults]") {
  temp_dir dir;
  backend_options o = options("file");
  o.nodes = 1;
  o.file_dirs = {(dir.path / "node0").string()};
  o.file_quota_bytes = 3 * (4096 + 8192);  // room for three blocks of 8 KiB
  file_backend b(o);
  std::vector<block_ref> blocks;
  std::vector<block_bytes_t> payloads;
  for (uint64_t i = 0; i < 5; ++i) {
    blocks.push_back({i, 0x500 + i});
    payloads.push_back(pattern_payload(0x500 + i, 8192));
  }
  std::vector<bool> stored = put_now(b, blocks, payloads);
  CHECK(std::count(stored.begin(), stored.end(), true) == 3);
  CHECK(b.counters().puts_failed == 2);
  CHECK(files_under(dir.path, ".tmp.") == 0);
  std::vector<bool> present = exists_now(b, blocks);
  CHECK(present == stored);
  // Space comes back when the pool evicts.
  std::vector<block_ref> kept;
  for (size_t i = 0; i < 5; ++i)
    if (stored[i])
      kept.push_back(blocks[i]);
  remove_now(b, {kept[0]});
  CHECK(b.used_bytes(0) == 2 * (4096 + 8192));
  size_t failed = 0;
  for (size_t i = 0; i < 5; ++i)
    failed += !stored[i] ? 1 : 0;
  std::vector<block_ref> retry;
  std::vector<block_bytes_t> retry_payloads;
  for (size_t i = 0; i < 5 && retry.empty(); ++i)
    if (!stored[i]) {
      retry.push_back(blocks[i]);
      retry_payloads.push_back(payloads[i]);
    }
  CHECK(failed == 2);
  CHECK(put_now(b, retry, retry_payloads) == std::vector<bool>{true});
}

TEST_CASE("file backend with O_DIRECT keeps what it stored", "[storage][backend]") {
  // Under the build directory: temporary directories are tmpfs on some hosts, which had no
  // O_DIRECT before Linux 6.6.
  fs::path dir = fs::current_path() / "kvtier-direct-test";
  fs::remove_all(dir);
  backend_options o = options("file");
  o.file_direct = true;
  for (int n = 0; n < 3; ++n)
    o.file_dirs.push_back((dir / ("node" + std::to_string(n))).string());
  {
    file_backend b(o);
    round_trip(b);
  }
  SECTION("into page-aligned memory directly, into any other through an aligned bounce buffer") {
    file_backend b(o);
    block_ref r = block_on(1, 9);
    REQUIRE(put_now(b, {r}, {pattern_payload(r.hash, 8192)}) == std::vector<bool>{true});
    void* memory = nullptr;
    REQUIRE(::posix_memalign(&memory, 4096, 8192 + 4096) == 0);
    auto* base = static_cast<uint8_t*>(memory);
    for (uint8_t* at : {base, base + 1}) {  // aligned, then not
      std::memset(at, 0, 8192);
      std::promise<std::vector<bool>> p;
      b.get({r}, {{at, 8192}}, [&](std::vector<bool> found) { p.set_value(found); });
      CHECK(p.get_future().get() == std::vector<bool>{true});
      CHECK(check_pattern_payload(r.hash, 8192, at, 8192) == "");
    }
    std::free(memory);
  }
  fs::remove_all(dir);
}

TEST_CASE("redis backend keeps what it stored, two parts per block", "[storage][backend][redis]") {
  redis_server a, b, c;
  backend_options o = options("redis");
  o.redis = {a.address(), b.address(), c.address()};
  redis_backend r(o);
  round_trip(r);
  // three blocks left, two keys each, each on its home node
  CHECK(a.keys() == 4);
  CHECK(b.keys() == 0);
  CHECK(c.keys() == 2);
  CHECK(a.command({"EXISTS", "kvtier:test-model:bf16:0000000000001001:k"}) == "1");
  CHECK(a.command({"EXISTS", "kvtier:test-model:bf16:0000000000001001:v"}) == "1");
}

TEST_CASE("redis_cluster backend keeps what it stored, both parts in one slot",
          "[storage][backend][redis][cluster]") {
  redis_cluster_servers cluster(3, 0);
  backend_options o = options("redis_cluster");
  o.redis_cluster = {cluster.seeds()[1]};  // one seed finds the rest
  redis_cluster_backend r(o);
  CHECK(r.masters().size() == 3);
  round_trip(r);
  // three blocks left, two keys each, held by the masters their slots belong to
  CHECK(cluster.master_keys() == 6);
  CHECK(r.counters().node_downs == 0);
}

TEST_CASE("redis backend: a block with a part that failed is rolled back, never half there",
          "[storage][backend][redis][faults]") {
  redis_server a;
  backend_options o = options("redis");
  o.nodes = 1;
  o.redis = {a.address()};
  redis_backend r(o);
  // The server refuses every write to a ":v" key (an ACL): the ":k" part lands, then must go.
  REQUIRE(a.command({"ACL", "SETUSER", "default", "resetkeys", "~*:k"}) == "OK");
  block_ref blk{1, 0x77};
  CHECK(put_now(r, {blk}, {pattern_payload(0x77, 4096)}) == std::vector<bool>{false});
  CHECK(r.counters().rollbacks == 1);
  CHECK(r.counters().puts_failed == 1);
  REQUIRE(a.command({"ACL", "SETUSER", "default", "allkeys"}) == "OK");
  CHECK(a.keys() == 0);
  CHECK(exists_now(r, {blk}) == std::vector<bool>{false});
  // A block missing one part (as after a crash between the writes) does not count either.
  REQUIRE(a.command({"SET", "kvtier:test-model:bf16:0000000000000078:k", "half"}) == "OK");
  block_ref half{1, 0x78};
  CHECK(exists_now(r, {half}) == std::vector<bool>{false});
  CHECK_FALSE(get_now(r, {half}, 4096)[0].has_value());
  // Listed apart: never a block, but it takes room until a reconcile deletes it.
  block_listing listing = listing_now(r);
  CHECK(listing.blocks.empty());
  CHECK(listing.partial == std::vector<uint64_t>{0x78});
  // Keys outside kvtier's namespace are never listed (a reconcile would delete them).
  REQUIRE(a.command({"SET", "kvtier:other-model:bf16:0000000000000079:k", "x"}) == "OK");
  REQUIRE(a.command({"SET", "somebody-else:0000000000000079:k", "x"}) == "OK");
  CHECK(listing_now(r).partial == std::vector<uint64_t>{0x78});
}

TEST_CASE("redis backend: a failed put's landed parts are gone by the time it answers",
          "[storage][backend][redis][faults]") {
  redis_server a;
  backend_options o = options("redis");
  o.nodes = 1;
  o.redis = {a.address()};
  redis_backend r(o);
  // Every ":v" write is refused: each block's ":k" part lands and must be rolled back. The pool
  // frees a failed put's room when the put answers, so the parts must be gone by then, or the
  // node holds more than the pool's capacity (docs/design.md "Capacity").
  REQUIRE(a.command({"ACL", "SETUSER", "default", "resetkeys", "~*:k"}) == "OK");
  std::vector<block_ref> blocks;
  std::vector<block_bytes_t> payloads;
  for (uint64_t i = 0; i < 20; ++i) {
    blocks.push_back({1, 0x500 + i});
    payloads.push_back(pattern_payload(0x500 + i, 256 << 10));
  }
  std::promise<uint64_t> held_at_answer;
  auto f = held_at_answer.get_future();
  r.put(blocks, std::move(payloads),
        [&](std::vector<bool>) { held_at_answer.set_value(a.keys()); });
  CHECK(f.get() == 0);
  CHECK(r.counters().rollbacks == 20);
  CHECK(r.counters().puts_failed == 20);
}

TEST_CASE("redis backend: a node that goes down misses and drops, then comes back",
          "[storage][backend][redis][faults]") {
  redis_server a, b;
  backend_options o = options("redis");
  o.nodes = 2;
  o.redis = {a.address(), b.address()};
  redis_backend r(o);
  block_ref on_a{0, 0x10}, on_b{uint64_t{1} << 32, 0x11};
  REQUIRE(put_now(r, {on_a, on_b}, {pattern_payload(0x10, 4096), pattern_payload(0x11, 4096)}) ==
          std::vector<bool>{true, true});
  b.kill();
  auto got = get_now(r, {on_a, on_b}, 4096);
  CHECK(got[0].has_value());
  CHECK_FALSE(got[1].has_value());
  CHECK(put_now(r, {on_b}, {pattern_payload(0x11, 4096)}) == std::vector<bool>{false});
  CHECK(exists_now(r, {on_a, on_b}) == std::vector<bool>{true, false});
  CHECK(r.counters().node_downs == 1);
  CHECK_FALSE(r.node_up(1));
  // A delete the node cannot take is reported not done (the pool owes it), and a listing says it
  // could not list that node (what is there is neither lost nor an orphan).
  CHECK(remove_now(r, {on_a, on_b}) == std::vector<bool>{true, false});
  CHECK(listing_now(r).listed == std::vector<uint8_t>{1, 0});
  b.start();  // back, empty
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!r.node_up(1) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(r.node_up(1));
  CHECK(r.counters().reconnects == 1);
  CHECK_FALSE(get_now(r, {on_b}, 4096)[0].has_value());
  CHECK(put_now(r, {on_b}, {pattern_payload(0x11, 4096)}) == std::vector<bool>{true});
  CHECK(check_pattern_payload(0x11, 4096, *get_now(r, {on_b}, 4096)[0]) == "");
}

TEST_CASE("redis backend: an unreachable node at start is an error naming it",
          "[storage][backend][redis]") {
  backend_options o = options("redis");
  o.nodes = 1;
  o.redis = {"127.0.0.1:" + std::to_string(free_loopback_port())};
  CHECK_THROWS_WITH(redis_backend(o), Catch::Contains("cannot reach " + o.redis[0]));
  o.redis = {"localhost"};
  CHECK_THROWS_WITH(redis_backend(o), Catch::Contains("expected host:port"));
}
