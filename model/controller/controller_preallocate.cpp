#include "model/controller/controller_core.hpp"

#include "core/check.hpp"

namespace kvtier {

// Only device hits are kept: a host copy would need a swap-in that the handoff does not wait
// for, so D takes those blocks from P like any other it lacks. The blocks are P's: its write
// policy backs them up and stores them, so D's does not copy them again.
preallocation_result controller_core::preallocate(const preallocation& p,
                                                  std::vector<transfer>& out) {
  preallocation_result res;
  res.req = p.req;
  KVTIER_ASSERT(!requests_.contains(p.req));
  request_state& r = requests_[p.req];
  r.blocks = p.blocks;
  r.layout = request_layout(r.blocks, options_.block_size);
  r.backups = policy_backups::none;
  model_.match(r.blocks.data(), r.blocks.size(), match_);
  uint32_t need = r.layout.blocks_for(p.tokens);
  uint32_t hits = std::min(match_.device, need);
  std::vector<node_id> path(match_.nodes.begin(), match_.nodes.begin() + hits);
  model_.acquire_matched(path.data(), path.size(), policy_backups::none);
  std::vector<transfer_order> orders;
  fresh_.clear();
  bool ok = model_.allocate_device(need - hits, fresh_, orders);
  tracker_.batch(orders, out);  // write-backs of what it evicted, whether or not it fits
  if (!ok) {
    model_.release_from_tail(path);
    requests_.erase(p.req);
    res.available_blocks = model_.device_available();
    return res;
  }
  uint64_t hit_tokens = 0;
  for (uint32_t i = 0; i < hits; ++i) {
    r.table.push_back(model_.tree().node(path[i]).block_in(tier::device));
    r.owned.push_back(0);
    hit_tokens += r.layout.tokens_of(i);
  }
  for (block_id b : fresh_) {
    r.table.push_back(b);
    r.owned.push_back(1);
  }
  r.path = std::move(path);
  r.committed = hits;
  r.admitted = true;
  ++admitted_;  // it runs as soon as its KV is there
  res.ok = true;
  res.device_hit_blocks = hits;
  res.device_hit_tokens = hit_tokens;
  res.available_blocks = model_.device_available();
  return res;
}

}  // namespace kvtier
