// Storage pool semantics at the index (storage_index): two-phase puts, exists leases with their
// expiry, watermark eviction, node loss; and the index's checker, fed corrupted state on purpose,
// names each broken invariant.

#include "model/storage/storage_index.hpp"

#include <catch2/catch.hpp>

#include "sim/report/fault_report.hpp"

namespace kvtier {

// Reaches into the index to break one invariant at a time.
struct storage_index_tamper {
  static void make_visible_while_writing(storage_index& s, storage_key k) {
    s.map_.try_emplace(k, 0);
    ++s.nodes_[s.node_of(k)].size;
  }
  static void lease_unstored(storage_index& s, storage_key k) { s.leases_[k] = 1; }
  static void exists_lease_unstored(storage_index& s, storage_key k) { s.exists_leases_[k] = 1; }
  static void miscount(storage_index& s, uint32_t node) { ++s.nodes_[node].size; }
  static void overfill(storage_index& s, storage_key k) {
    s.map_.try_emplace(k, 0);
    s.nodes_[s.node_of(k)].capacity = 0;
    ++s.nodes_[s.node_of(k)].size;
  }
  static void store_on_down_node(storage_index& s, uint32_t node, storage_key k) {
    s.nodes_[node].down = true;
    s.map_.try_emplace(k, 0);
    ++s.nodes_[node].size;
  }
};

}  // namespace kvtier

using namespace kvtier;

namespace {

storage_key on_node(uint64_t node, uint64_t low) {
  return node << 32 | low;
}

bool sound(const storage_index& s) {
  std::vector<std::string> problems;
  s.check(problems);
  return problems.empty();
}

std::string first_problem(const storage_index& s) {
  std::vector<std::string> problems;
  s.check(problems);
  return problems.empty() ? std::string{} : problems.front();
}

}  // namespace

TEST_CASE("storage pool: a put in flight is invisible and not written twice", "[storage][pool]") {
  storage_index s(10);
  CHECK(s.begin_put(1) == put_start::write);
  CHECK_FALSE(s.contains(1));      // exists does not see it
  CHECK_FALSE(s.lease(1));         // get does not read it
  CHECK(s.begin_put(1) == put_start::in_flight);
  CHECK(s.writes_in_flight() == 1);
  CHECK(sound(s));
  CHECK(s.end_put(1, true));
  CHECK(s.contains(1));
  CHECK(s.begin_put(1) == put_start::present);
  CHECK(s.writes_in_flight() == 0);
  // A failed write leaves no key behind, and the key can be written again.
  CHECK(s.begin_put(2) == put_start::write);
  CHECK_FALSE(s.end_put(2, false));
  CHECK_FALSE(s.contains(2));
  CHECK(s.begin_put(2) == put_start::write);
  CHECK(s.end_put(2, true));
  CHECK(s.unwritten_reads() == 0);
  CHECK(sound(s));
}

TEST_CASE("storage pool: an exists lease protects a key until it expires", "[storage][pool]") {
  storage_pool_policy p;
  p.lease_ns = 10'000;
  storage_index s(2, 1, p);
  s.set_now(0);
  s.put(1);
  s.put(2);
  s.set_now(100);
  s.lease_for(1);  // leased until 10'100; 1 is still the least recently used
  CHECK(s.lease_active(1));
  s.set_now(10'099);
  REQUIRE(s.put(3));  // evicts 2: 1 is leased
  CHECK(s.contains(1));
  CHECK_FALSE(s.contains(2));
  CHECK(s.lease_deferrals() == 1);
  s.set_now(10'100);  // the lease has ended
  CHECK_FALSE(s.lease_active(1));
  REQUIRE(s.put(4));  // passed over just before 3 was stored, 1 is the oldest again: it goes
  CHECK_FALSE(s.contains(1));
  CHECK(s.contains(3));
  CHECK(s.lease_deferrals() == 1);
  CHECK(sound(s));
}

TEST_CASE("storage pool: without leases, exists protects nothing", "[storage][pool]") {
  storage_index s(2);
  s.put(1);
  s.put(2);
  s.lease_for(1);
  CHECK_FALSE(s.lease_active(1));
  REQUIRE(s.put(3));
  CHECK_FALSE(s.contains(1));
}

TEST_CASE("storage pool: watermark eviction frees a batch, LRU over unleased keys",
          "[storage][pool]") {
  storage_pool_policy p;
  p.eviction = storage_eviction::watermark;
  p.high_watermark = 0.8;
  p.evict_fraction = 0.3;  // 3 of 10
  p.lease_ns = 1000;
  storage_index s(10, 1, p);
  for (storage_key k = 1; k <= 8; ++k)
    REQUIRE(s.put(k));
  CHECK(s.size() == 8);  // at the watermark, not above
  CHECK(s.eviction_batches() == 0);
  s.lease_for(1);        // an exists matched 1, the oldest: passed over
  REQUIRE(s.put(9));     // 9 > 8: a batch of 3 -> 2, 3, 4 go
  CHECK(s.eviction_batches() == 1);
  CHECK(s.evictions() == 3);
  CHECK(s.size() == 6);
  CHECK(s.contains(1));
  for (storage_key k : {2, 3, 4})
    CHECK_FALSE(s.contains(k));
  CHECK(s.contains(9));
  CHECK(sound(s));
}

TEST_CASE("storage pool: LRU eviction is one block at a time", "[storage][pool]") {
  storage_index s(3);
  for (storage_key k = 1; k <= 4; ++k)
    REQUIRE(s.put(k));
  CHECK(s.size() == 3);
  CHECK(s.evictions() == 1);
  CHECK(s.eviction_batches() == 0);
}

TEST_CASE("storage pool: a lost node loses its keys and refuses writes until it is back",
          "[storage][pool]") {
  storage_index s(10, 2);
  storage_key a = on_node(0, 1), b = on_node(1, 2), c = on_node(1, 3);
  s.put(a);
  s.put(b);
  REQUIRE(s.lease(b));
  CHECK(s.begin_put(c) == put_start::write);
  std::vector<storage_key> lost;
  s.drop_node(1, &lost);
  CHECK(lost == std::vector<storage_key>{b});
  CHECK(s.contains(a));
  CHECK_FALSE(s.contains(b));
  CHECK(s.leased_keys() == 0);  // its lease went with it
  CHECK(s.begin_put(on_node(1, 4)) == put_start::node_down);
  CHECK_FALSE(s.put(on_node(1, 4)));
  CHECK_FALSE(s.end_put(c, false));  // the write in flight ends without a key
  CHECK(sound(s));
  s.node_up(1);
  CHECK(s.begin_put(on_node(1, 4)) == put_start::write);
  CHECK(s.end_put(on_node(1, 4), true));
  CHECK(sound(s));
}

TEST_CASE("storage pool checker: each invariant fires on corrupted state", "[storage][pool]") {
  SECTION("a block visible while its put is in flight, and the read it allows") {
    storage_index s(10);
    REQUIRE(s.begin_put(5) == put_start::write);
    storage_index_tamper::make_visible_while_writing(s, 5);
    CHECK(first_problem(s) == "storage index: block 5 is visible while its put is in flight");
    CHECK_FALSE(s.lease(5));  // never served...
    CHECK(s.unwritten_reads() == 1);  // ...and counted
    std::vector<std::string> problems;
    s.check(problems);
    REQUIRE(problems.size() == 2);
    CHECK(problems[1] == "storage index: 1 reads of blocks not completely written");
  }
  SECTION("a get lease on a block not stored") {
    storage_index s(10);
    storage_index_tamper::lease_unstored(s, 7);
    CHECK(first_problem(s) == "storage index: a get lease on block 7, which is not stored");
  }
  SECTION("an exists lease on a block not stored") {
    storage_index s(10);
    storage_index_tamper::exists_lease_unstored(s, 8);
    CHECK(first_problem(s) == "storage index: an exists lease on block 8, which is not stored");
  }
  SECTION("a node's count off") {
    storage_index s(10);
    s.put(1);
    storage_index_tamper::miscount(s, 0);
    CHECK(first_problem(s) == "storage index: node 0 counts 2 blocks but holds 1");
  }
  SECTION("a node over its capacity") {
    storage_index s(10);
    storage_index_tamper::overfill(s, 3);
    CHECK(first_problem(s) == "storage index: node 0 holds 1 blocks, over its capacity 0");
  }
  SECTION("blocks on a node that is down") {
    storage_index s(10, 2);
    storage_index_tamper::store_on_down_node(s, 1, on_node(1, 9));
    CHECK(first_problem(s) == "storage index: node 1 is down but holds 1 blocks");
  }
}

TEST_CASE("storage pool checker: the end-of-run leak checks fire", "[storage][pool]") {
  storage_report clean;
  CHECK(storage_end_problems(clean).empty());
  storage_report leaky;
  leaky.open_leases = 1;
  leaky.leased_keys = 2;
  leaky.pending = 3;
  leaky.writes_in_flight = 4;
  leaky.invariant_messages = {"storage index: node 0 counts 2 blocks but holds 1"};
  std::vector<std::string> p = storage_end_problems(leaky);
  REQUIRE(p.size() == 5);
  CHECK(p[0] == "storage index: node 0 counts 2 blocks but holds 1");
  CHECK(p[1] == "storage: 1 get leases still open at the end of the replay");
  CHECK(p[2] == "storage: 2 blocks still leased at the end of the replay");
  CHECK(p[3] == "storage: 3 requests still unanswered at the end of the replay");
  CHECK(p[4] == "storage: 4 puts still in flight at the end of the replay");
}
