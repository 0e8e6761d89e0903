// The fluid link model's per-flow cap (one stream's rate): exact completion times of capped flows
// alone, beside uncapped ones, and with caps that do not bind.

#include <catch2/catch.hpp>

#include <map>

#include "model/links/link_model.hpp"

using namespace kvtier;

namespace {

// Runs the model to its end; the completion time of each flow's last operation, by flow id.
std::map<link_model::flow_id, int64_t> finish_all(link_model& m) {
  std::map<link_model::flow_id, int64_t> at;
  std::vector<link_model::op_done> done;
  while (m.next_event() != link_model::never)
    m.advance(m.next_event(), done);
  for (const auto& d : done)
    if (d.last)
      at[d.flow] = d.at;
  return at;
}

}  // namespace

TEST_CASE("link model: a capped flow alone moves at its cap, not the link's bandwidth",
          "[links][cap]") {
  link_model m;
  auto link = m.add_link("node", 10);  // 10 bytes per ns
  auto f = m.start(0, {link}, {{100, 1000}}, 2);
  auto at = finish_all(m);
  CHECK(at[f] == 100 + 500);  // latency, then 1000 bytes at 2 bytes/ns
  CHECK(m.stats()[0].bytes == 1000);
  CHECK(m.stats()[0].busy_ns == 500);
}

TEST_CASE("link model: an uncapped flow takes what a capped one leaves", "[links][cap]") {
  link_model m;
  auto link = m.add_link("node", 4);
  auto capped = m.start(0, {link}, {{0, 1000}}, 1);
  auto free = m.start(0, {link}, {{0, 6000}});
  auto at = finish_all(m);
  CHECK(at[capped] == 1000);  // 1 byte/ns, below the fair 2
  // 3 bytes/ns beside it (3000 bytes by 1000 ns), then the whole 4 for the last 3000: 750 ns
  CHECK(at[free] == 1750);
}

TEST_CASE("link model: two capped flows below the level, the rest to the third",
          "[links][cap]") {
  link_model m;
  auto link = m.add_link("node", 6);
  auto a = m.start(0, {link}, {{0, 1000}}, 1);
  auto b = m.start(0, {link}, {{0, 1500}}, 1.5);
  auto c = m.start(0, {link}, {{0, 7000}});
  auto at = finish_all(m);
  CHECK(at[a] == 1000);
  CHECK(at[b] == 1000);
  // 3.5 bytes/ns for 1000 ns, then the whole 6 for the last 3500 bytes
  CHECK(at[c] == 1000 + 584);  // 3500 / 6 = 583.3: the first whole nanosecond after
}

TEST_CASE("link model: a cap above the fair share changes nothing", "[links][cap]") {
  auto run = [](double cap_a, double cap_b) {
    link_model m;
    auto link = m.add_link("node", 2);
    auto other = m.add_link("net", 1.5);
    m.start(0, {link}, {{50, 1000}}, cap_a);
    m.start(0, {link, other}, {{0, 3000}}, cap_b);
    m.start(0, {link}, {{10, 777}});
    return finish_all(m);
  };
  auto plain = run(0, 0);
  auto high = run(5, 1.5);  // 5 above every share; 1.5 equal to the other link's bandwidth
  CHECK(plain == high);
  CHECK(plain.size() == 3);
}

TEST_CASE("link model: a cap does not lift a flow above its slowest link", "[links][cap]") {
  link_model m;
  auto fast = m.add_link("fast", 10);
  auto slow = m.add_link("slow", 1);
  auto f = m.start(0, {fast, slow}, {{0, 1000}}, 5);
  auto at = finish_all(m);
  CHECK(at[f] == 1000);
}
