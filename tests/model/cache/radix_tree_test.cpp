#include "model/cache/radix_tree.hpp"

#include <random>

#include <catch2/catch.hpp>

using namespace kvtier;

namespace {

// A chain of nodes with ready device copies (blocks 0, 1, ...), unreferenced.
std::vector<node_id> device_chain(radix_tree& tree, node_id parent, std::vector<block_hash> hashes,
                                  block_id first_block = 0) {
  std::vector<node_id> out;
  for (block_hash h : hashes) {
    parent = tree.add(parent, h, 16);
    tree.set_copy(parent, tier::device, copy_state::ready, first_block++);
    out.push_back(parent);
  }
  return out;
}

void hold_and_release(radix_tree& tree, const std::vector<node_id>& path) {
  for (node_id id : path)
    tree.acquire(id, true);
  for (auto it = path.rbegin(); it != path.rend(); ++it)
    tree.release(*it);
}

std::vector<node_id> take(radix_tree& tree, tier t, uint32_t n) {
  std::vector<node_id> out;
  if (!tree.take_evictable(t, n, out))
    return {};
  for (node_id id : out) {
    tree.set_copy(id, t, copy_state::absent);
    if (!tree.node(id).has(tier::device) && !tree.node(id).has(tier::host))
      tree.remove(id);
  }
  return out;
}

}  // namespace

TEST_CASE("radix_tree: nodes are found by hash and linked to their parent", "[tree]") {
  radix_tree tree;
  auto a = device_chain(tree, root_node, {11, 12});
  auto b = device_chain(tree, a[0], {13}, 2);
  CHECK(tree.size() == 3);
  CHECK(tree.find(11) == a[0]);
  CHECK(tree.find(13) == b[0]);
  CHECK(tree.find(99) == root_node);
  CHECK(tree.node(a[0]).children == 2);
  CHECK(tree.node(a[0]).device_children == 2);
  CHECK(tree.node(b[0]).parent == a[0]);
  CHECK(tree.node(a[0]).hit_count == 1);
}

TEST_CASE("radix_tree: refs protect a path and only leaves are evictable", "[tree]") {
  radix_tree tree;
  auto path = device_chain(tree, root_node, {1, 2, 3});
  // Unreferenced from the start: only the leaf may go, the others become leaves in turn.
  CHECK(tree.evictable(tier::device) == 1);
  CHECK(tree.reclaimable(tier::device) == 3);
  for (node_id id : path)
    tree.acquire(id, true);
  CHECK(tree.evictable(tier::device) == 0);
  CHECK(tree.reclaimable(tier::device) == 0);
  CHECK(tree.node(path[1]).hit_count == 2);
  for (node_id id : path)  // head first: still the leaf goes first
    tree.release(id);
  CHECK(take(tree, tier::device, 3) == std::vector<node_id>{path[2], path[1], path[0]});
  CHECK(tree.size() == 0);
}

TEST_CASE("radix_tree: LRU order is the time a node became evictable", "[tree]") {
  radix_tree tree;
  auto x = device_chain(tree, root_node, {1}, 0);
  auto y = device_chain(tree, root_node, {2}, 1);
  hold_and_release(tree, x);  // x becomes evictable first
  hold_and_release(tree, y);
  // A lookup is not a use: it does not move x.
  CHECK(tree.find(1) == x[0]);
  CHECK(tree.peek_victim(tier::device) == x[0]);
  // Holding and releasing it again does.
  hold_and_release(tree, x);
  CHECK(take(tree, tier::device, 1) == std::vector<node_id>{y[0]});
  CHECK(take(tree, tier::device, 1) == std::vector<node_id>{x[0]});
}

TEST_CASE("radix_tree: an evicted leaf's parent joins the set with its own age", "[tree]") {
  radix_tree tree;
  auto old_path = device_chain(tree, root_node, {1, 2}, 0);
  auto young = device_chain(tree, root_node, {3}, 2);
  hold_and_release(tree, old_path);
  hold_and_release(tree, young);
  // The old path's leaf goes first; its parent, older than `young`, goes next.
  CHECK(take(tree, tier::device, 2) == std::vector<node_id>{old_path[1], old_path[0]});
}

TEST_CASE("radix_tree: eviction is all or nothing", "[tree]") {
  radix_tree tree;
  auto a = device_chain(tree, root_node, {1, 2}, 0);
  auto held = device_chain(tree, root_node, {3}, 2);
  hold_and_release(tree, a);
  tree.acquire(held[0], true);
  std::vector<node_id> out;
  CHECK_FALSE(tree.take_evictable(tier::device, 3, out));
  CHECK(out.empty());
  CHECK(tree.evictable(tier::device) == 1);
  CHECK(tree.reclaimable(tier::device) == 2);
  CHECK(take(tree, tier::device, 2) == std::vector<node_id>{a[1], a[0]});
  tree.release(held[0]);
}

TEST_CASE("radix_tree: a shortage found midway is rolled back", "[tree]") {
  radix_tree tree;
  // A host-only parent whose child's host copy is still being filled: reclaimable, not a leaf.
  node_id p = tree.add(root_node, 1, 16);
  tree.set_copy(p, tier::host, copy_state::ready, 0);
  node_id c = tree.add(p, 2, 16);
  tree.set_copy(c, tier::host, copy_state::filling, 1);
  node_id q = tree.add(root_node, 3, 16);
  tree.set_copy(q, tier::host, copy_state::ready, 2);
  CHECK(tree.reclaimable(tier::host) == 2);
  CHECK(tree.evictable(tier::host) == 1);
  std::vector<node_id> out;
  CHECK_FALSE(tree.take_evictable(tier::host, 2, out));
  CHECK(out.empty());
  CHECK(tree.evictable(tier::host) == 1);
  CHECK(tree.node(root_node).children == 2);
  CHECK(tree.peek_victim(tier::host) == q);
  tree.set_copy(c, tier::host, copy_state::ready, 1);
  CHECK(take(tree, tier::host, 3) == std::vector<node_id>{c, p, q});  // by age: c, p, q
}

TEST_CASE("radix_tree: LFU evicts the least hit first, then the oldest", "[tree]") {
  radix_tree tree(eviction_policy::lfu);
  auto hot = device_chain(tree, root_node, {1}, 0);
  auto cold = device_chain(tree, root_node, {2}, 1);
  auto cold2 = device_chain(tree, root_node, {3}, 2);
  hold_and_release(tree, hot);
  hold_and_release(tree, hot);  // hot: 3 hits, released first
  hold_and_release(tree, cold);
  hold_and_release(tree, cold2);
  CHECK(take(tree, tier::device, 3) == std::vector<node_id>{cold[0], cold2[0], hot[0]});
}

TEST_CASE("radix_tree: the host set holds host-only leaves", "[tree]") {
  radix_tree tree;
  auto path = device_chain(tree, root_node, {1, 2}, 0);
  tree.set_copy(path[1], tier::host, copy_state::ready, 5);
  CHECK(tree.evictable(tier::host) == 0);  // still on device
  std::vector<node_id> out;
  REQUIRE(tree.take_evictable(tier::device, 1, out));
  tree.renew_order(path[1]);
  tree.set_copy(path[1], tier::device, copy_state::absent);
  CHECK(tree.evictable(tier::host) == 1);
  CHECK(tree.evictable(tier::device) == 1);  // the parent is a device leaf now
  CHECK(tree.node(path[0]).device_children == 0);
  CHECK(tree.node(path[0]).children == 1);
  tree.reset();
  CHECK(tree.size() == 0);
  CHECK(tree.evictable(tier::host) == 0);
}

TEST_CASE("radix_tree: a block joins the host set aged by its move to host", "[tree]") {
  radix_tree tree;
  auto x = device_chain(tree, root_node, {1}, 0);
  auto y = device_chain(tree, root_node, {2}, 1);
  hold_and_release(tree, x);  // x became unreferenced before y
  hold_and_release(tree, y);
  std::vector<node_id> out;
  REQUIRE(tree.take_evictable(tier::device, 2, out));
  CHECK(out == std::vector<node_id>{x[0], y[0]});
  for (node_id id : {y[0], x[0]}) {  // but y moves to host first
    tree.set_copy(id, tier::host, copy_state::ready, id);
    tree.renew_order(id);
    tree.set_copy(id, tier::device, copy_state::absent);
  }
  CHECK(take(tree, tier::host, 2) == std::vector<node_id>{y[0], x[0]});
}

namespace {

// A random forest of `n` nodes in tier `t` (device copies, or host-only copies), every one
// unreferenced, whose paths were held and released in a random order: the same seed builds the
// same tree.
void random_forest(radix_tree& tree, tier t, uint64_t seed, uint32_t n) {
  std::mt19937_64 rng(seed);
  std::vector<node_id> nodes;
  for (uint32_t i = 0; i < n; ++i) {
    node_id parent = nodes.empty() || rng() % 4 == 0 ? root_node : nodes[rng() % nodes.size()];
    node_id id = tree.add(parent, 1000 + i, 16);
    tree.set_copy(id, t, copy_state::ready, i);
    nodes.push_back(id);
  }
  for (uint32_t k = 0; k < n; ++k) {
    std::vector<node_id> path;
    for (node_id id = nodes[rng() % nodes.size()]; id != root_node; id = tree.node(id).parent)
      path.insert(path.begin(), id);
    hold_and_release(tree, path);
  }
}

}  // namespace

TEST_CASE("radix_tree: victims taken together are those taken one by one", "[tree][property]") {
  // take_evictable takes an uncovered parent without queueing it when it is the next victim; one
  // victim per call never does. Both must give the same victims and leave the same sets.
  for (eviction_policy policy : {eviction_policy::lru, eviction_policy::lfu}) {
    for (tier t : {tier::device, tier::host}) {
      for (uint64_t seed = 1; seed <= 300; ++seed) {
        CAPTURE(to_string(policy), to_string(t), seed);
        radix_tree together(policy), alone(policy);
        uint32_t n = 5 + static_cast<uint32_t>(seed % 60);
        random_forest(together, t, seed, n);
        random_forest(alone, t, seed, n);
        std::mt19937_64 rng(seed * 7919);
        while (together.reclaimable(t) > 0) {
          uint32_t want = 1 + static_cast<uint32_t>(rng() % together.reclaimable(t));
          std::vector<node_id> many = take(together, t, want);
          std::vector<node_id> single;
          for (uint32_t i = 0; i < want; ++i)
            for (node_id id : take(alone, t, 1))
              single.push_back(id);
          REQUIRE(many == single);
          REQUIRE(together.evictable(t) == alone.evictable(t));
          REQUIRE(together.reclaimable(t) == alone.reclaimable(t));
          REQUIRE(together.live_entries(t) == together.evictable(t));
          REQUIRE(together.peek_victim(t) == alone.peek_victim(t));
        }
        CHECK(together.size() == 0);
      }
    }
  }
}
