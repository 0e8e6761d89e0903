#include "model/cache/outstanding_orders.hpp"

#include <map>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

using namespace kvtier;

namespace {

struct order {
  uint64_t id = 0;
  uint32_t payload = 0;
};

}  // namespace

// The ring against a std::map on random runs: ids issued in increasing order (with gaps), taken
// mostly oldest first but also at random, the ring wrapping and growing as the window moves.
TEST_CASE("outstanding_orders: the ring holds what a map would, taken in any order", "[tree]") {
  std::mt19937_64 rng(37);
  for (int round = 0; round < 40; ++round) {
    outstanding_orders<order> ring;
    std::map<uint64_t, uint32_t> reference;
    uint64_t next = 1 + rng() % 1000;
    for (int step = 0; step < 3000; ++step) {
      bool add = reference.empty() || rng() % 100 < 52;
      if (add) {
        next += 1 + (rng() % 10 == 0 ? rng() % 5 : 0);  // now and then an id never added here
        order o{next, static_cast<uint32_t>(rng())};
        ring.add(o);
        reference[o.id] = o.payload;
      } else {
        auto it = reference.begin();
        if (rng() % 4 == 0)  // not the oldest
          std::advance(it, static_cast<long>(rng() % reference.size()));
        order got = ring.take(it->first);
        REQUIRE(got.id == it->first);
        REQUIRE(got.payload == it->second);
        reference.erase(it);
      }
      REQUIRE(ring.size() == reference.size());
      REQUIRE(ring.empty() == reference.empty());
    }
    std::vector<uint64_t> seen;
    ring.for_each([&](const order& o) { seen.push_back(o.id); });
    std::vector<uint64_t> want;
    for (auto& [id, payload] : reference)
      want.push_back(id);
    REQUIRE(seen == want);  // in id order, as the invariant checker walks them
  }
}
