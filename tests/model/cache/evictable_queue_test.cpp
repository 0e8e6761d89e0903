#include "model/cache/evictable_queue.hpp"

#include <map>
#include <random>
#include <utility>

#include <catch2/catch.hpp>

using namespace kvtier;

namespace {

using key = std::pair<uint64_t, uint64_t>;

evictable_queue::entry make(key k, uint32_t id) {
  return {k.first, k.second, id};
}

}  // namespace

TEST_CASE("evictable_queue: a leaf chain evicted tail first pops each parent next, in order",
          "[tree]") {
  // The controller's pattern: a path released tail first (keys 10.. from the tail up), the tail
  // taken, its parent pushed back with its older key, and so on up the path.
  evictable_queue q;
  q.push(make({10, 0}, 0));   // the chain's tail
  q.push(make({100, 0}, 1));  // younger leaves elsewhere
  q.push(make({101, 0}, 2));
  evictable_queue::entry out;
  auto any = [](const evictable_queue::entry&) { return true; };
  REQUIRE(q.pop(any, out));
  CHECK(out.id == 0);
  for (uint32_t up = 1; up <= 5; ++up) {
    q.push(make({10 + up, 0}, 10 + up));  // older than the queue's back: not the FIFO
    REQUIRE(q.pop(any, out));
    CHECK(out.id == 10 + up);
  }
  REQUIRE(q.pop(any, out));
  CHECK(out.id == 1);
}

TEST_CASE("evictable_queue: random pushes, stale entries and compaction keep key order",
          "[tree]") {
  // Against an ordered map: every pop returns the smallest valid key, whichever of the FIFO,
  // the stack or the heap holds it.
  std::mt19937_64 rng(GENERATE(1, 2, 3, 4, 5));
  evictable_queue q;
  std::map<key, uint32_t> live;           // valid entries, by key
  std::map<uint32_t, bool> valid_ids;     // id -> still valid
  uint64_t next = 1000;
  uint32_t id = 0;
  auto valid = [&](const evictable_queue::entry& e) { return valid_ids[e.id]; };
  for (int round = 0; round < 20000; ++round) {
    int op = static_cast<int>(rng() % 10);
    if (op < 4) {  // the youngest key so far (a release now)
      key k{next++, 0};
      q.push(make(k, id));
      live[k] = id;
      valid_ids[id++] = true;
    } else if (op < 6) {  // an older key (a parent turning into a leaf), unique
      key k{rng() % next, 1 + (rng() % 1000000)};
      if (live.count(k))
        continue;
      q.push(make(k, id));
      live[k] = id;
      valid_ids[id++] = true;
    } else if (op < 7 && !live.empty()) {  // an entry goes stale (its node was held again)
      auto it = std::next(live.begin(), static_cast<long>(rng() % live.size()));
      valid_ids[it->second] = false;
      live.erase(it);
    } else if (op < 8 && rng() % 50 == 0) {
      q.compact(valid);
      REQUIRE(q.size() == live.size());
    } else {
      evictable_queue::entry out;
      bool got = q.pop(valid, out);
      REQUIRE(got == !live.empty());
      if (!got)
        continue;
      REQUIRE(out.id == live.begin()->second);
      REQUIRE(key{out.k1, out.k2} == live.begin()->first);
      valid_ids[out.id] = false;
      live.erase(live.begin());
    }
  }
}
