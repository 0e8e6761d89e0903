// Device copies dropped by the engine that owns the device tier (docs/protocol.md, version 3):
// the engine's KV cache manager evicted a block, so its bytes are gone. The model forgets the
// copy without any write-back (nothing may be read from a block the engine reused) and keeps a
// host copy if it has one.

#include "model/cache/cache_model.hpp"

namespace kvtier {

uint32_t cache_model::drop_device_copy(block_hash hash, std::vector<transfer_order>& orders) {
  node_id top = tree_.find(hash);
  if (top == root_node || !tree_.node(top).ready(tier::device))
    return 0;
  // Prefix closure: the node's device-resident descendants go with it, leaves first. A block
  // some request holds in the model stays (the engine cannot have dropped what it reads).
  std::vector<node_id> order;
  std::vector<node_id> stack(1, top);
  while (!stack.empty()) {
    node_id x = stack.back();
    stack.pop_back();
    const tree_node& n = tree_.node(x);
    if (!n.ready(tier::device))
      continue;
    if (n.ref_count > 0)
      return 0;
    order.push_back(x);
    tree_.for_each_child(x, [&](node_id c) { stack.push_back(c); });
  }
  // Leaves first, each taken out of the evictable set and evicted as the model evicts, except
  // that nothing is written back: the device copy goes, a host copy stays (and enters the host
  // set as an evicted block does), a node without one goes with its subtree.
  uint32_t dropped = 0;
  for (auto it = order.rbegin(); it != order.rend(); ++it, ++dropped) {
    if (!tree_.take_member(*it, tier::device))
      break;  // a copy below it still filling: it stays, and so do its ancestors
    evict_device_node(*it, false, orders);
  }
  counters_.engine_drops += dropped;
  return dropped;
}

}  // namespace kvtier
