// The tree's checker (model/cache/invariants.cpp) against corrupted state: each of T1, T4, T6
// and the counts fires when the tree's bookkeeping disagrees with its nodes.

#include <functional>
#include <string>

#include "tests/model/cache/cache_harness.hpp"

namespace kvtier {

struct radix_tree_tamper {
  static radix_tree& tree(const cache_model& m) { return const_cast<radix_tree&>(m.tree()); }
  static tree_node& node(const cache_model& m, node_id id) { return tree(m).nodes_[id]; }
  static void flip(const cache_model& m, node_id id, unsigned bit) {
    tree_node& n = node(m, id);
    n.set_membership(n.membership() ^ bit);
  }
  static void miscount_reclaimable(const cache_model& m, int t) { ++tree(m).reclaimable_[t]; }
  static void miscount_set(const cache_model& m, int t) { ++tree(m).set_count_[t]; }
};

}  // namespace kvtier

using namespace kvtier;
using namespace kvtier::test;

namespace {

// A model whose tree has device-set members, host-only leaves and idle blocks with both copies.
harness populated() {
  harness h(tiers(6, 12, write_policy::write_through, 1));
  h.serve({1, 2, 3});
  h.serve({1, 2, 4});
  h.serve({5, 6});
  h.serve({7, 8, 9});  // evicts the oldest device leaves to the host
  h.serve({10, 11, 12});
  return h;
}

node_id first_node(const cache_model& m, const std::function<bool(const tree_node&)>& pick) {
  for (node_id id : m.tree().live_nodes())
    if (pick(m.tree().node(id)))
      return id;
  FAIL("no node to corrupt");
  return root_node;
}

std::string violations_of(const cache_model& m) {
  invariant_report r;
  check_invariants(m, true, r);
  std::string all;
  for (const auto& s : r.messages)
    all += s + "\n";
  return r.ok() ? std::string{} : all;
}

}  // namespace

TEST_CASE("tree checker: each invariant fires on a corrupted tree", "[tree][invariants]") {
  REQUIRE(violations_of(populated().m).empty());
  auto in_set = [](int t) { return [t](const tree_node& n) { return n.in_set(t); }; };

  SECTION("a device-set member marked out of the set (T4)") {
    harness h = populated();
    radix_tree_tamper::flip(h.m, first_node(h.m, in_set(0)), tree_node::in_device_set);
    std::string v = violations_of(h.m);
    CHECK(v.find("device evictable membership (T4)") != std::string::npos);
  }
  SECTION("a host-set member marked out of the set (T4)") {
    harness h = populated();
    radix_tree_tamper::flip(h.m, first_node(h.m, in_set(1)), tree_node::in_host_set);
    CHECK(violations_of(h.m).find("host evictable membership (T4)") != std::string::npos);
  }
  SECTION("a reclaimable block's mark of being counted cleared") {
    harness h = populated();
    radix_tree_tamper::flip(
      h.m, first_node(h.m, [](const tree_node& n) { return n.membership() & tree_node::counted_device; }),
      tree_node::counted_device);
    CHECK(violations_of(h.m).find("device reclaimable mark") != std::string::npos);
  }
  SECTION("an idle block with both copies marked out of the copy set (T6)") {
    harness h = populated();
    radix_tree_tamper::flip(h.m, first_node(h.m, [](const tree_node& n) { return n.in_copies(); }),
                            tree_node::in_copy_set);
    CHECK(violations_of(h.m).find("copy set membership (T6)") != std::string::npos);
  }
  SECTION("a child count off by one (T1)") {
    harness h = populated();
    ++radix_tree_tamper::node(h.m, first_node(h.m, [](const tree_node& n) { return n.children > 0; }))
        .children;
    CHECK(violations_of(h.m).find("child count (T1)") != std::string::npos);
  }
  SECTION("a device child count off by one (T1)") {
    harness h = populated();
    ++radix_tree_tamper::node(h.m, first_node(h.m, [](const tree_node& n) {
                                 return n.device_children > 0;
                               })).device_children;
    CHECK(violations_of(h.m).find("device child count (T1)") != std::string::npos);
  }
  SECTION("the reclaimable count off by one") {
    harness h = populated();
    radix_tree_tamper::miscount_reclaimable(h.m, 1);
    CHECK(violations_of(h.m).find("host reclaimable count") != std::string::npos);
  }
  SECTION("the evictable count off by one") {
    harness h = populated();
    radix_tree_tamper::miscount_set(h.m, 0);
    CHECK(violations_of(h.m).find("device evictable count") != std::string::npos);
  }
}
