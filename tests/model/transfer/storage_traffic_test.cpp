// The transfer engine's storage backpressure and parts driven directly, without CAF
// (model/transfer/storage_traffic.hpp), plus a property on random traffic checked against the
// bound.

#include <algorithm>
#include <random>

#include <catch2/catch.hpp>

#include "model/transfer/storage_traffic.hpp"
#include "tests/stops_the_run.hpp"

using namespace kvtier;
using kvtier::test::stops_the_run;

namespace {

bool same(const storage_grant& r, uint64_t id, transfer_kind kind, size_t from, size_t count) {
  return r.id == id && r.kind == kind && r.from == from && r.count == count;
}

}  // namespace

TEST_CASE("storage traffic: without a bound everything goes at once, loads whole",
          "[transfer][storage_traffic]") {
  storage_traffic t(100, 0);
  t.enqueue(1, transfer_kind::store, 5);
  t.enqueue(2, transfer_kind::load, 3);
  auto go = t.pump(0);
  REQUIRE(go.size() == 2);
  CHECK(same(go[0], 1, transfer_kind::store, 0, 5));
  CHECK(go[0].first());
  CHECK(same(go[1], 2, transfer_kind::load, 0, 3));
  CHECK(t.inflight_bytes() == 800);
  CHECK(t.counts().inflight_peak_bytes == 800);
  CHECK(t.counts().waits == 0);
}

TEST_CASE("storage traffic: a store goes in as many puts as room allows, the rest waits in order",
          "[transfer][storage_traffic]") {
  storage_traffic t(100, 250);  // room for two blocks
  t.enqueue(1, transfer_kind::store, 5);
  t.enqueue(2, transfer_kind::store, 1);
  auto go = t.pump(10);
  REQUIRE(go.size() == 1);
  CHECK(same(go[0], 1, transfer_kind::store, 0, 2));
  CHECK(t.inflight_bytes() == 200);
  CHECK(t.counts().waits == 1);  // the store's rest waits, heading the queue
  t.begin_parts(1);
  CHECK_FALSE(t.put_answered(1, 2, {}));
  go = t.pump(40);
  REQUIRE(go.size() == 1);
  CHECK(same(go[0], 1, transfer_kind::store, 2, 2));
  CHECK_FALSE(go[0].first());
  CHECK(t.counts().wait_ns == 30);
  CHECK(t.counts().waits == 2);  // and again
  CHECK_FALSE(t.put_answered(1, 2, {}));
  go = t.pump(45);
  REQUIRE(go.size() == 2);  // the last block, then store 2's, fit together
  CHECK(same(go[0], 1, transfer_kind::store, 4, 1));
  CHECK(same(go[1], 2, transfer_kind::store, 0, 1));
  CHECK(t.counts().wait_ns == 35);
  CHECK(t.waiting() == 0);
  CHECK(t.put_answered(1, 1, {}));  // store 1's last put: its storage part ends
  CHECK(t.counts().inflight_peak_bytes == 200);
}

TEST_CASE("storage traffic: a load waits for room for all of it, unless nothing is in flight",
          "[transfer][storage_traffic]") {
  storage_traffic t(100, 250);
  t.enqueue(1, transfer_kind::store, 1);
  t.enqueue(2, transfer_kind::load, 2);
  auto go = t.pump(0);
  REQUIRE(go.size() == 1);  // 150 bytes of room: the load's 200 must wait
  t.begin_parts(1);
  CHECK(t.put_answered(1, 1, {}));
  go = t.pump(5);
  REQUIRE(go.size() == 1);
  CHECK(same(go[0], 2, transfer_kind::load, 0, 2));
  // One transfer's worth at least: a load larger than the bound goes once nothing is in flight.
  t.enqueue(3, transfer_kind::load, 4);
  CHECK(t.pump(6).empty());
  t.begin_parts(2);
  CHECK_FALSE(t.end_part(2, storage_part::answer));
  CHECK(t.end_part(2, storage_part::flow));
  CHECK(t.forget(2));  // its buffers are free: room was made
  go = t.pump(9);
  REQUIRE(go.size() == 1);
  CHECK(same(go[0], 3, transfer_kind::load, 0, 4));
  CHECK(t.inflight_bytes() == 400);
  CHECK(t.counts().inflight_peak_bytes == 400);
  CHECK_FALSE(t.forget(99));  // not a storage transfer
}

TEST_CASE("storage traffic: a transfer ends once both parts have, failed if either failed",
          "[transfer][storage_traffic]") {
  storage_traffic t(0, 0);  // storage keeps no bytes: nothing is bounded
  t.enqueue(1, transfer_kind::load, 2);
  t.enqueue(2, transfer_kind::store, 3);
  auto go = t.pump(0);
  REQUIRE(go.size() == 2);
  t.begin_parts(1);
  t.begin_parts(2);
  t.fail(1, {storage_fault::get_failed, "timeout"});
  t.fail(1, {storage_fault::payload_mismatch, "later"});  // the first failure is the one told
  CHECK_FALSE(t.end_part(1, storage_part::answer));
  auto ended = t.end_part(1, storage_part::flow);
  REQUIRE(ended);
  CHECK(ended->message() == "storage get failed: timeout");
  CHECK_FALSE(t.forget(1));  // no bytes were held

  CHECK_FALSE(t.end_part(2, storage_part::flow));
  CHECK(t.put_answered(2, 3, {storage_fault::put_failed, "node down"}));
  ended = t.end_part(2, storage_part::answer);
  REQUIRE(ended);
  CHECK(ended->fault == storage_fault::put_failed);
  CHECK(ended->message() == "storage put failed: node down");

  CHECK(storage_failure{}.message().empty());
  CHECK(storage_failure{storage_fault::payload_mismatch, "block 3 differs"}.message()
        == "block 3 differs");
}

TEST_CASE("storage traffic: parts out of turn stop the run", "[transfer][storage_traffic]") {
  auto one_load = [] {
    storage_traffic t(0, 0);
    t.enqueue(1, transfer_kind::load, 1);
    t.pump(0);
    return t;
  };
  CHECK(stops_the_run([&] {  // a part ending before the transfer began
    storage_traffic t = one_load();
    t.end_part(1, storage_part::flow);
  }));
  CHECK(stops_the_run([&] {  // a part ending twice
    storage_traffic t = one_load();
    t.begin_parts(1);
    t.end_part(1, storage_part::answer);
    t.end_part(1, storage_part::answer);
  }));
  CHECK(stops_the_run([&] {  // a put answered that was never made
    storage_traffic t = one_load();
    t.put_answered(1, 1, {});
  }));
  CHECK(stops_the_run([] {  // delivered while still waiting for room
    storage_traffic t(100, 100);
    t.enqueue(1, transfer_kind::store, 1);
    t.enqueue(2, transfer_kind::store, 1);
    t.pump(0);
    t.forget(2);
  }));
}

// Random loads and stores, answered in random order: what is in flight never passes the bound
// but by one transfer's worth let go into an empty link, every byte held is freed, and
// transfers start in the order they came.
namespace {

// Plays the engine's part: begins what the queue lets go, answers puts and loads, ends both
// parts of each transfer and forgets it.
struct engine_double {
  explicit engine_double(storage_traffic& traffic) : t(traffic) {}
  storage_traffic& t;
  struct open_put { uint64_t id; size_t count; };
  std::vector<open_put> puts;
  std::vector<uint64_t> loads, started;

  /// Returns how many releases the queue let go.
  size_t take(int64_t now) {
    std::vector<storage_grant> go = t.pump(now);
    for (const storage_grant& r : go) {
      if (r.first()) {
        t.begin_parts(r.id);
        started.push_back(r.id);
      }
      if (r.kind == transfer_kind::load)
        loads.push_back(r.id);
      else
        puts.push_back({r.id, r.count});
    }
    return go.size();
  }
  void ended(uint64_t id, std::optional<storage_failure> how) {
    REQUIRE(how);
    CHECK_FALSE(how->failed());
    t.forget(id);
  }
  void answer_put(size_t i) {
    open_put p = puts[i];
    puts.erase(puts.begin() + static_cast<long>(i));
    if (t.put_answered(p.id, p.count, {})) {
      CHECK_FALSE(t.end_part(p.id, storage_part::flow));
      ended(p.id, t.end_part(p.id, storage_part::answer));
    }
  }
  void answer_load(size_t i) {
    uint64_t id = loads[i];
    loads.erase(loads.begin() + static_cast<long>(i));
    CHECK_FALSE(t.end_part(id, storage_part::answer));
    ended(id, t.end_part(id, storage_part::flow));
  }
};

}  // namespace

TEST_CASE("storage traffic: random traffic stays within the bound", "[transfer][storage_traffic]") {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    INFO("seed " << seed);
    std::mt19937_64 rng(seed);
    const uint64_t each = 1 + rng() % 64;
    const uint64_t bound = rng() % 4 == 0 ? 0 : each * (1 + rng() % 12);
    storage_traffic t(each, bound);
    engine_double e(t);
    uint64_t next_id = 1, biggest = each;
    for (int step = 0; step < 300; ++step) {
      uint32_t what = rng() % 3;
      if (what == 0 || (e.puts.empty() && e.loads.empty())) {
        size_t n = 1 + rng() % 8;
        biggest = std::max(biggest, n * each);
        t.enqueue(next_id++, rng() % 2 ? transfer_kind::store : transfer_kind::load, n);
      } else if (!e.puts.empty() && (e.loads.empty() || rng() % 2)) {
        e.answer_put(rng() % e.puts.size());
      } else {
        e.answer_load(rng() % e.loads.size());
      }
      // Bytes go only into room; past the bound only one transfer's worth, into an empty link.
      uint64_t before = t.inflight_bytes();
      if (e.take(step) > 0 && bound > 0 && t.inflight_bytes() > bound)
        CHECK((before == 0 && t.inflight_bytes() <= biggest));
    }
    CHECK(std::is_sorted(e.started.begin(), e.started.end()));
    // Answer everything: whatever waited goes, and every byte held comes back.
    while (!e.puts.empty() || !e.loads.empty() || t.waiting() > 0) {
      while (!e.puts.empty())
        e.answer_put(0);
      while (!e.loads.empty())
        e.answer_load(0);
      e.take(1'000);
    }
    CHECK(t.inflight_bytes() == 0);
  }
}
