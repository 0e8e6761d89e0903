// The redis_cluster backend against real clusters on loopback ports: slot routing as Redis
// Cluster's specification gives it, a slot migrating (ASK) and moved (MOVED), and a master that
// dies and whose replica takes over (storage/redis_cluster_backend.hpp).

#include <catch2/catch.hpp>

#include "storage/payload_pattern.hpp"
#include "storage/redis_cluster_backend.hpp"
#include "storage/redis_cluster_slots.hpp"
#include "tests/storage/backend_calls.hpp"
#include "tests/storage/redis_cluster_servers.hpp"

using namespace kvtier;
using namespace kvtier::test;

namespace {

backend_options cluster_options(const redis_cluster_servers& cluster) {
  backend_options o;
  o.kind = storage_backend_kind::redis_cluster;
  o.ns = {"test-model", "bf16"};
  o.nodes = 1;
  o.redis_cluster = cluster.seeds();
  return o;
}

// The master of `cluster` that serves `key`'s slot now: the others answer MOVED.
size_t owner_of(redis_cluster_servers& cluster, const std::string& key) {
  for (size_t i = 0; i < cluster.size(); ++i) {
    auto& n = cluster.node(i);
    if (n.running() && redis_cluster_servers::is_master(n) &&
        n.command({"EXISTS", key}).rfind("MOVED", 0) != 0)
      return i;
  }
  throw std::runtime_error("no master serves " + key);
}

}  // namespace

TEST_CASE("cluster keys hash as Redis Cluster's specification says", "[storage][cluster]") {
  CHECK(crc16_xmodem("123456789") == 0x31c3);  // the specification's check value
  CHECK(key_slot("foo") == 12182);
  CHECK(key_slot("bar") == 5061);
  // a hash tag: only the text between the first { and the next } counts, if not empty
  CHECK(key_slot("{user1000}.following") == key_slot("{user1000}.followers"));
  CHECK(key_slot("{user1000}.following") == key_slot("user1000"));
  CHECK(key_slot("foo{}{bar}") == crc16_xmodem("foo{}{bar}") % 16384);
  CHECK(key_slot("foo{{bar}}zap") == key_slot("{bar"));
  block_namespace ns{"m", "bf16"};
  CHECK(key_slot(redis_cluster_backend::part_key(ns, 7, 0)) ==
        key_slot(redis_cluster_backend::part_key(ns, 7, 1)));
  int part = -1;
  CHECK(redis_cluster_backend::hash_of_part_key(ns, "{kvtier:m:bf16:0000000000000007}:v",
                                                &part) == 7u);
  CHECK(part == 1);
  CHECK_FALSE(redis_cluster_backend::hash_of_part_key(ns, "kvtier:m:bf16:0000000000000007:v",
                                                      &part));
}

TEST_CASE("cluster redirects name their slot and node", "[storage][cluster]") {
  redisReply moved{};
  moved.type = REDIS_REPLY_ERROR;
  std::string text = "MOVED 3999 127.0.0.1:6381";
  moved.str = text.data();
  moved.len = text.size();
  auto r = parse_redirect(&moved);
  REQUIRE(r);
  CHECK(r->what == cluster_redirect::kind::moved);
  CHECK(r->slot == 3999);
  CHECK(r->address == "127.0.0.1:6381");
  text = "ASK 12 10.0.0.2:7000";
  moved.str = text.data();
  moved.len = text.size();
  CHECK(parse_redirect(&moved)->what == cluster_redirect::kind::ask);
  text = "ERR unknown command";
  moved.str = text.data();
  moved.len = text.size();
  CHECK_FALSE(parse_redirect(&moved));
}

TEST_CASE("redis_cluster backend follows a slot that migrates (ASK) and moves (MOVED)",
          "[storage][redis][cluster]") {
  redis_cluster_servers cluster(3, 0);
  redis_cluster_backend b(cluster_options(cluster));
  block_namespace ns{"test-model", "bf16"};
  block_ref block{1, 0xa5};
  std::string key = redis_cluster_backend::part_key(ns, block.hash, 0);
  uint32_t slot = key_slot(key);
  size_t from = owner_of(cluster, key);
  size_t to = (from + 1) % cluster.size();
  std::string from_id = cluster.node(from).command({"CLUSTER", "MYID"});
  std::string to_id = cluster.node(to).command({"CLUSTER", "MYID"});
  std::string s = std::to_string(slot);
  REQUIRE(cluster.node(to).command({"CLUSTER", "SETSLOT", s, "IMPORTING", from_id}) == "OK");
  REQUIRE(cluster.node(from).command({"CLUSTER", "SETSLOT", s, "MIGRATING", to_id}) == "OK");
  // Mid-migration a key the old node does not hold is asked of the new one.
  block_bytes_t payload = pattern_payload(block.hash, 10000);
  CHECK(put_now(b, {block}, {payload}) == std::vector<bool>{true});
  CHECK(cluster.node(to).keys() == 2);
  CHECK(exists_now(b, {block}) == std::vector<bool>{true});
  CHECK(b.counters().puts_ok == 1);
  // The migration ends: the slot is the new node's, and the old one answers MOVED.
  for (size_t i = 0; i < cluster.size(); ++i)
    cluster.node(i).command({"CLUSTER", "SETSLOT", s, "NODE", to_id});
  auto got = get_now(b, {block}, payload.size());
  REQUIRE(got[0].has_value());
  CHECK(check_pattern_payload(block.hash, payload.size(), *got[0]) == "");
  CHECK(exists_now(b, {block}) == std::vector<bool>{true});
  remove_now(b, {block});
  CHECK(exists_now(b, {block}) == std::vector<bool>{false});
  CHECK(b.counters().corrupt == 0);
  CHECK(b.counters().removed == 1);
  CHECK(cluster.master_keys() == 0);
}

TEST_CASE("redis_cluster backend rides out a master's failover",
          "[storage][redis][cluster][faults]") {
  redis_cluster_servers cluster(3, 1);
  redis_cluster_backend b(cluster_options(cluster));
  std::vector<block_ref> blocks;
  std::vector<block_bytes_t> payloads;
  for (uint64_t i = 0; i < 30; ++i) {
    blocks.push_back({i, 0x100 + i});
    payloads.push_back(pattern_payload(0x100 + i, 4096));
  }
  REQUIRE(put_now(b, blocks, payloads) == std::vector<bool>(30, true));
  // Let the replicas copy what was written, then kill the master of the first block's slot.
  cluster.wait_replicated();
  block_namespace ns{"test-model", "bf16"};
  size_t victim = owner_of(cluster, redis_cluster_backend::part_key(ns, 0x100, 0));
  cluster.node(victim).kill();
  // Every block comes back, through the promoted replica, within the failover wait.
  auto got = get_now(b, blocks, 4096);
  for (size_t i = 0; i < blocks.size(); ++i) {
    REQUIRE(got[i].has_value());
    CHECK(check_pattern_payload(blocks[i].hash, 4096, *got[i]) == "");
  }
  backend_counters c = b.counters();
  CHECK(c.node_downs >= 1);
  CHECK(c.reconnects == 1);
  CHECK(b.node_reachable(0));
  CHECK(c.corrupt == 0);
  CHECK(list_now(b).size() == blocks.size());
}
