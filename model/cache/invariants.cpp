#include "model/cache/invariants.hpp"

#include <utility>
#include <vector>

namespace kvtier {

namespace {

constexpr size_t message_limit = 20;

std::string node_text(const radix_tree& tree, node_id id) {
  return "node " + std::to_string(id) + " (hash " + std::to_string(tree.node(id).hash) + ")";
}

std::pair<uint64_t, uint64_t> order_key(const radix_tree& tree, node_id id) {
  const tree_node& x = tree.node(id);
  return tree.policy() == eviction_policy::lru
           ? std::pair<uint64_t, uint64_t>{x.release_order, 0}
           : std::pair<uint64_t, uint64_t>{x.hit_count, x.release_order};
}

// T6: the copy set's count, entries and order, given the members counted node by node.
void check_copy_set(const radix_tree& tree, const std::vector<node_id>& live, uint32_t copies,
                    invariant_report& r) {
  r.expect(tree.copies() == copies, [&] { return std::string{"copy set count (T6)"}; });
  std::vector<uint8_t> entered(tree.slot_count(), 0);
  tree.for_each_copy_entry([&](node_id id) { entered[id] = 1; });
  for (node_id id : live)
    if (tree.node(id).in_copies())
      r.expect(entered[id] == 1, [&] { return node_text(tree, id) + ": a copy-set member has an entry (T6)"; });
  node_id first = tree.peek_copy();
  if (first == root_node) {
    r.expect(copies == 0, [&] { return std::string{"copy set empty iff nothing to give up (T6)"}; });
    return;
  }
  bool smallest = true;
  for (node_id id : live)
    if (tree.node(id).in_copies() && order_key(tree, id) < order_key(tree, first))
      smallest = false;
  r.expect(smallest, [&] { return std::string{"the next copy given up has the smallest key (T6)"}; });
}

void check_tree(const radix_tree& tree, invariant_report& r) {
  std::vector<node_id> live = tree.live_nodes();
  r.expect(live.size() == tree.size(), [&] { return std::string{"live node count matches size()"}; });
  r.expect(tree.indexed() == tree.size(), [&] { return std::string{"hash map holds exactly the live nodes"}; });
  std::vector<uint32_t> children(tree.slot_count(), 0), device_children(tree.slot_count(), 0);
  uint32_t in_set[node_tier_count] = {0, 0};
  uint32_t reclaimable[node_tier_count] = {0, 0};
  uint32_t copies = 0;
  for (node_id id : live) {
    const tree_node& x = tree.node(id);
    const tree_node& p = tree.node(x.parent);
    r.expect(tree.find(x.hash) == id, [&] { return node_text(tree, id) + " is found by its hash"; });
    r.expect(p.live(), [&] { return node_text(tree, id) + " has a live parent"; });
    ++children[x.parent];
    if (x.has(tier::device)) {
      ++device_children[x.parent];
      r.expect(x.parent == root_node || p.has(tier::device), [&] { return node_text(tree, id) + ": device copy under a parent without one (T2)"; });
    }
    r.expect(x.has(tier::device) || x.has(tier::host), [&] { return node_text(tree, id) + " has a copy in some tier"; });
    r.expect(x.parent == root_node || p.ref_count >= x.ref_count, [&] { return node_text(tree, id) + ": ref above its parent's (T3)"; });
    r.expect(!x.taken(0) && !x.taken(1), [&] { return node_text(tree, id) + " is not left half-evicted"; });
    // T4 and T6 restated from the node's fields here, not asked of the tree's own rule
    // (radix_tree::derived_membership), which is what keeps the marks checked below.
    bool copy_member = x.ref_count == 0 && x.ready(tier::device) && x.ready(tier::host);
    r.expect(x.in_copies() == copy_member, [&] { return node_text(tree, id) + ": copy set membership (T6)"; });
    copies += x.in_copies();
    for (int t = 0; t < node_tier_count; ++t) {
      tier tt = static_cast<tier>(t);
      bool reclaim = x.ref_count == 0 && x.ready(tt) && (t == 0 || !x.has(tier::device));
      bool want = reclaim && (t == 0 ? x.device_children == 0 : x.children == 0);
      // The node's own mark of being counted in reclaimable(t) goes with its membership: one
      // condition per node and tier, as before the mark existed (the goldens count them).
      bool counted = x.membership() & (tree_node::counted_device << t);
      r.expect(x.in_set(t) == want && counted == reclaim, [&] {
        return node_text(tree, id) + ": " + to_string(tt)
               + (x.in_set(t) != want ? " evictable membership (T4)" : " reclaimable mark");
      });
      in_set[t] += x.in_set(t);
      reclaimable[t] += reclaim;
    }
  }
  for (node_id id : live) {
    const tree_node& x = tree.node(id);
    uint32_t listed = 0;
    tree.for_each_child(id, [&](node_id c) {
      ++listed;
      r.expect(tree.node(c).parent == id, [&] { return node_text(tree, c) + " lists the right parent"; });
    });
    r.expect(listed == children[id] && x.children == children[id], [&] { return node_text(tree, id) + ": child count (T1)"; });
    r.expect(x.device_children == device_children[id], [&] { return node_text(tree, id) + ": device child count (T1)"; });
  }
  check_copy_set(tree, live, copies, r);
  for (int t = 0; t < node_tier_count; ++t) {
    tier tt = static_cast<tier>(t);
    std::string name = to_string(tt);
    r.expect(tree.evictable(tt) == in_set[t], [&] { return name + " evictable count"; });
    r.expect(tree.live_entries(tt) == in_set[t], [&] { return name + " queue has an entry for every member"; });
    r.expect(tree.reclaimable(tt) == reclaimable[t], [&] { return name + " reclaimable count"; });
    // T5: the next victim has the smallest key among the members.
    node_id victim = tree.peek_victim(tt);
    if (victim == root_node) {
      r.expect(in_set[t] == 0, [&] { return name + " set empty iff no victim"; });
      continue;
    }
    bool smallest = true;
    for (node_id id : live)
      if (tree.node(id).in_set(t) && order_key(tree, id) < order_key(tree, victim))
        smallest = false;
    r.expect(smallest, [&] { return name + " next victim has the smallest key (T5)"; });
  }
}

void check_blocks(const cache_model& m, bool quiescent, invariant_report& r) {
  const radix_tree& tree = m.tree();
  for (int t = 0; t < node_tier_count; ++t) {
    tier tt = static_cast<tier>(t);
    const block_pool& pool = m.pool(tt);
    std::string name = to_string(tt);
    std::vector<uint32_t> owners(pool.touched_count(), 0);
    std::vector<uint32_t> pins(owners.size(), 0);
    uint32_t owned = 0;
    for (node_id id : tree.live_nodes()) {
      const tree_node& x = tree.node(id);
      if (!x.has(tt))
        continue;
      block_id b = x.block_in(tt);
      r.expect(b < owners.size(), [&] { return node_text(tree, id) + ": " + name + " block in range"; });
      if (b >= owners.size())
        continue;
      ++owned;
      ++owners[b];
      r.expect(pool.block_state(b) == block_pool::state::used, [&] { return node_text(tree, id) + ": its " + name + " block is in use"; });
    }
    for (uint32_t b = 0; b < owners.size(); ++b)
      r.expect(owners[b] <= 1, [&] { return name + " block " + std::to_string(b) + " owned once"; });
    uint32_t privately = tt == tier::device ? m.private_device_blocks() : 0;
    r.expect(pool.used_count() == owned + privately, [&] { return name + " conservation: used == node-owned + private"; });
    r.expect(pool.free_count() + pool.retired_count() + pool.used_count() == pool.capacity(), [&] { return name + " conservation: free + retired + used == capacity"; });
    m.outstanding().for_each([&](const transfer_order& o) {
      bool uses_device = o.kind == transfer_kind::backup || o.kind == transfer_kind::write_back
                         || o.kind == transfer_kind::swap_in;
      block_id b = tt == tier::device ? o.device_block : o.host_block;
      if ((tt == tier::device && !uses_device) || b >= pins.size())
        return;
      ++pins[b];
    });
    uint32_t retired = 0;
    for (uint32_t b = 0; b < pins.size(); ++b) {
      bool free = pool.block_state(b) == block_pool::state::free;
      r.expect(pool.pins(b) == pins[b], [&] { return name + " block " + std::to_string(b) + ": pins match outstanding orders"; });
      r.expect(!(free && pins[b] > 0), [&] { return name + " block " + std::to_string(b) + " is not free while a transfer uses it"; });
      retired += pool.block_state(b) == block_pool::state::retired;
    }
    r.expect(retired == pool.retired_count(), [&] { return name + " retired count"; });
    if (quiescent)
      r.expect(pool.retired_count() == 0, [&] { return name + ": no block left retired"; });
  }
  // Every filling copy has the order that fills it.
  std::vector<uint8_t> filled(tree.slot_count() * 2, 0);
  m.outstanding().for_each([&](const transfer_order& o) {
    const tree_node& x = tree.node(o.node);
    if (!x.live() || x.generation != o.generation)
      return;
    if (o.kind == transfer_kind::swap_in) {
      filled[2 * o.node] += 1;
      // Its source is the node's host copy until it lands (cache_model::complete frees or
      // keeps it then): nothing else may free it meanwhile.
      r.expect(x.ready(tier::host) && x.block_in(tier::host) == o.host_block, [&] { return node_text(tree, o.node) + ": a swap-in reads its host copy until it lands"; });
    } else if (o.kind != transfer_kind::store)
      filled[2 * o.node + 1] += 1;
  });
  for (node_id id : tree.live_nodes()) {
    const tree_node& x = tree.node(id);
    for (int t = 0; t < node_tier_count; ++t) {
      bool filling = x.state_at(t) == copy_state::filling;
      r.expect(filling == (filled[2 * id + t] == 1), [&] { return node_text(tree, id) + ": a filling copy has exactly one order filling it"; });
    }
    if (quiescent)
      r.expect(x.ref_count == 0, [&] { return node_text(tree, id) + " is not held at the end"; });
  }
  if (quiescent) {
    r.expect(m.outstanding().empty(), [&] { return std::string{"no transfer outstanding at the end"}; });
    r.expect(m.private_device_blocks() == 0, [&] { return std::string{"no private device block at the end"}; });
  }
}

}  // namespace

void invariant_report::fail(std::string what) {
  ++violations;
  if (messages.size() < message_limit)
    messages.push_back(std::move(what));
}

void invariant_report::merge(const invariant_report& other) {
  checked += other.checked;
  violations += other.violations;
  for (const auto& m : other.messages)
    if (messages.size() < message_limit)
      messages.push_back(m);
}

void check_invariants(const cache_model& model, bool quiescent, invariant_report& report) {
  check_tree(model.tree(), report);
  check_blocks(model, quiescent, report);
}

}  // namespace kvtier
