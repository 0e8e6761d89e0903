#include "model/storage/storage_index.hpp"

#include <catch2/catch.hpp>

using namespace kvtier;

TEST_CASE("storage_index: LRU eviction, probes do not count as use", "[storage]") {
  storage_index s(3);
  REQUIRE(s.put(1));
  REQUIRE(s.put(2));
  REQUIRE(s.put(3));
  CHECK(s.contains(1));  // a probe: 1 stays least recently used
  REQUIRE(s.put(4));     // evicts 1
  CHECK_FALSE(s.contains(1));
  CHECK(s.touch(2));     // a use: 3 is now the oldest
  REQUIRE(s.put(5));
  CHECK_FALSE(s.contains(3));
  CHECK(s.contains(2));
  CHECK(s.size() == 3);
  CHECK(s.evictions() == 2);
}

TEST_CASE("storage_index: leading run counts only the stored prefix", "[storage]") {
  storage_index s(10);
  for (storage_key k : {10, 11, 13})
    s.put(k);
  std::vector<storage_key> keys{10, 11, 12, 13};
  CHECK(s.leading_run(keys.data(), keys.size()) == 2);
  CHECK(s.leading_run(keys.data() + 2, 2) == 0);
}

TEST_CASE("storage_index: a leased key is not evicted", "[storage]") {
  storage_index s(2);
  s.put(1);
  s.put(2);
  REQUIRE(s.lease(1));  // a get is reading it (and uses it: 2 becomes the oldest)
  s.touch(2);           // now 1 is the oldest, but leased
  REQUIRE(s.put(3));    // evicts 2, skipping the leased 1
  CHECK(s.contains(1));
  CHECK_FALSE(s.contains(2));
  REQUIRE(s.lease(3));
  CHECK_FALSE(s.put(4));  // everything leased: the put is refused
  s.release_lease(1);
  CHECK(s.put(4));
  CHECK_FALSE(s.contains(1));
}

TEST_CASE("storage_index: nodes split the capacity and keys spread over them", "[storage]") {
  storage_index s(10, 3);
  CHECK(s.nodes() == 3);
  std::vector<uint32_t> per_node(3, 0);
  for (uint64_t i = 0; i < 1000; ++i)
    ++per_node[s.node_of(make_storage_key(7, i))];
  for (uint32_t n : per_node)
    CHECK(n > 250);
  for (uint64_t i = 0; i < 100; ++i)
    s.put(make_storage_key(7, i));
  CHECK(s.size() == 10);  // 4 + 3 + 3
}

TEST_CASE("storage_index: keys are namespaced by model and dtype", "[storage]") {
  CHECK(make_storage_key(1, 42) != make_storage_key(2, 42));
  CHECK(make_storage_key(1, 42) == make_storage_key(1, 42));
}

TEST_CASE("storage_index: counting from acceptance, writes in flight take room", "[storage]") {
  storage_pool_policy policy;
  policy.count_from = storage_capacity_count::accepted;
  storage_index s(3, 1, policy);
  std::vector<storage_key> victims;
  REQUIRE(s.put(1));
  REQUIRE(s.put(2));
  // Writes in flight on a node of 3 holding 2: the first fits; the second evicts 1 at once (its
  // delete can go before the write), the third evicts 2: never more than 3 blocks and writes.
  CHECK(s.begin_put(10, &victims) == put_start::write);
  CHECK(victims.empty());
  CHECK(s.begin_put(11, &victims) == put_start::write);
  CHECK(victims == std::vector<storage_key>{1});
  CHECK(s.size() + s.writes_in_flight() == 3);
  CHECK(s.begin_put(12, &victims) == put_start::write);
  CHECK(victims == std::vector<storage_key>{1, 2});
  CHECK(s.size() == 0);
  // The node is all writes now: a fourth has no room and is refused, not queued.
  CHECK(s.begin_put(13, &victims) == put_start::no_room);
  REQUIRE(s.end_put(10, true, &victims));
  CHECK(victims.size() == 2);  // the end of a write evicts nothing: its room was made
  CHECK_FALSE(s.end_put(11, false));  // a failed write stores nothing, and frees its room
  CHECK(s.begin_put(13, &victims) == put_start::write);
  std::vector<std::string> problems;
  s.check(problems);
  CHECK(problems.empty());
}

TEST_CASE("storage_index: counting from storage (the model), writes in flight take no room",
          "[storage]") {
  storage_index s(1);
  CHECK(s.begin_put(1) == put_start::write);
  CHECK(s.begin_put(2) == put_start::write);
  REQUIRE(s.end_put(1, true));
  std::vector<storage_key> victims;
  REQUIRE(s.end_put(2, true, &victims));
  CHECK(victims == std::vector<storage_key>{1});
}
