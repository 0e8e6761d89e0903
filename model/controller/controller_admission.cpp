// Probes and admission: what a step may take, and the blocks an admitted or growing request
// gets.

#include "model/controller/controller_core.hpp"

#include <algorithm>

#include "core/check.hpp"

namespace kvtier {

void controller_core::count_wasted_loads(request_state& r, uint32_t hits) {
  for (size_t i = hits; i < r.loaded.size(); ++i)
    prefetch_.wasted_blocks += r.loaded[i];
  r.loaded.clear();
}

uint32_t controller_core::victim_frees(const request_state& r) const {
  uint32_t n = 0;
  for (uint8_t owned : r.owned)
    n += owned;
  for (node_id id : r.path) {
    const tree_node& x = model_.tree().node(id);
    n += x.ref_count == 1 && x.ready(tier::device);
  }
  return n;
}

probe_reply controller_core::on_probe(const probe& p) {
  block_event_batch batch(options_.events);
  probe_reply reply;
  reply.step = p.step;
  reply.available_blocks = model_.device_available();
  for (request_id id : p.candidates) {
    const request_state& r = requests_.at(id);
    model_.match(r.blocks.data(), r.blocks.size(), match_);
    uint32_t cached = match_.device + match_.host;
    uint32_t lost = r.cached_at_ready > cached ? r.cached_at_ready - cached : 0;
    reply.matches.push_back({id, match_.device, match_.host, match_.device_tokens,
                             match_.host_tokens, match_.device_idle, lost});
  }
  release_protected_if_idle();
  reply.available_blocks = model_.device_available();
  if (p.grow_blocks > reply.available_blocks) {
    uint64_t deficit = p.grow_blocks - reply.available_blocks, found = 0;
    for (size_t i = 0; i < p.victims.size() && found < deficit; ++i) {
      uint32_t f = victim_frees(requests_.at(p.victims[i]));
      reply.victim_frees.push_back(f);
      found += f;
    }
  }
  return reply;
}

void controller_core::note_written(const std::vector<block_id>& blocks, step_inputs& inputs) const {
  inputs.written.insert(inputs.written.end(), blocks.begin(), blocks.end());
}

bool controller_core::admit(request_id id, const token_mark& m, admit_result& res,
                            std::vector<transfer_order>& orders, step_inputs& inputs) {
  request_state& r = requests_.at(id);
  KVTIER_ASSERT(!r.admitted);
  res.req = id;
  model_.match(r.blocks.data(), r.blocks.size(), match_);
  std::vector<node_id> path = match_.nodes;
  // A re-admission finding its own blocks is no reuse: it counts toward no threshold
  // (docs/design.md "Write policies").
  if (r.preempted)
    model_.hold(path.data(), path.size());
  else
    model_.acquire_matched(path.data(), path.size());
  // Hits beyond the blocks this step covers are not taken (the scheduler planned fewer).
  uint32_t need = r.layout.blocks_for(m.tokens);
  uint32_t hits = std::min<uint32_t>(static_cast<uint32_t>(path.size()), need);
  // The step computes the block holding its last token (the scheduler counts it so, docs/
  // design.md "Hit ratio"): a host copy of it is not swapped in for nothing, and the block is
  // committed as computed; a device copy is held and computed in place. A live engine's
  // request (no target known) is its engine's to plan: what its lookup offered is admitted.
  bool covers_target = r.target_tokens > 0 && m.tokens >= r.target_tokens;
  if (covers_target && hits == need && hits > std::min(match_.device, hits))
    --hits;
  if (hits < path.size()) {
    std::vector<node_id> extra(path.begin() + hits, path.end());
    model_.release_from_tail(extra);
    path.resize(hits);
  }
  uint32_t device = std::min(match_.device, hits);
  fresh_.clear();
  if (!model_.allocate_device(need - device, fresh_, orders)) {
    model_.release_from_tail(path);
    return false;
  }
  uint32_t storage = 0;
  per_tier<uint64_t> tokens{};
  for (uint32_t i = 0; i < hits; ++i) {
    bool prefetched = i < r.loaded.size() && r.loaded[i];
    tier from = i < device ? tier::device : prefetched ? tier::storage : tier::host;
    storage += from == tier::storage;
    at(tokens, from) += r.layout.tokens_of(i);
  }
  // A protected prefetch held its blocks until now; under best_effort or timeout its loads may
  // still be in flight (what has not landed is computed).
  drop_prefetch_hold(r);
  count_wasted_loads(r, hits);
  r.prefetched = 0;
  r.lookup_before_admission = false;
  ++admitted_;
  r.path = std::move(path);
  r.table.clear();
  r.owned.clear();
  r.table.reserve(device + fresh_.size());  // the whole prompt, grown from empty otherwise
  r.owned.reserve(r.table.capacity());
  for (uint32_t i = 0; i < device; ++i) {
    r.table.push_back(model_.tree().node(r.path[i]).block_in(tier::device));
    r.owned.push_back(0);
  }
  for (uint32_t i = device; i < hits; ++i) {
    model_.swap_in(r.path[i], fresh_[i - device], orders);
    r.table.push_back(fresh_[i - device]);
    r.owned.push_back(0);
  }
  std::vector<block_id> computed_into(fresh_.begin() + (hits - device), fresh_.end());
  for (block_id b : computed_into) {
    r.table.push_back(b);
    r.owned.push_back(1);
  }
  note_written(computed_into, inputs);
  r.committed = hits;
  r.admitted = true;
  res.admitted = true;
  res.device_blocks = device;
  res.host_blocks = hits - device - storage;
  res.storage_blocks = storage;
  res.device_tokens = at(tokens, tier::device);
  res.host_tokens = at(tokens, tier::host);
  res.storage_tokens = at(tokens, tier::storage);
  return true;
}

bool controller_core::grow(request_state& r, uint32_t tokens, std::vector<transfer_order>& orders,
                           step_inputs& inputs) {
  KVTIER_ASSERT(r.admitted);
  uint32_t want = r.layout.blocks_for(tokens);
  if (want <= r.table.size())
    return true;
  fresh_.clear();
  if (!model_.allocate_device(want - static_cast<uint32_t>(r.table.size()), fresh_, orders))
    return false;
  for (block_id b : fresh_) {
    r.table.push_back(b);
    r.owned.push_back(1);
  }
  note_written(fresh_, inputs);
  return true;
}

}  // namespace kvtier
