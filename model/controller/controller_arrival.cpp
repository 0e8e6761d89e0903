// Arrival and storage prefetch: a request's storage lookup and the loads that follow it
// (controller_core.hpp says when the prefetched prefix is held).

#include "model/controller/controller_core.hpp"

namespace kvtier {

std::vector<uint64_t> controller_core::on_arrival(request_id req, std::vector<cache_block> blocks,
                                                  uint64_t target_tokens) {
  block_event_batch batch(options_.events);
  if (auto old = requests_.find(req); old != requests_.end()) {
    // Routed here again (a decode instance dropped it) before the commit releasing its last
    // pass here was sent: that pass's blocks go now.
    release(old->second);
    requests_.erase(old);
  }
  request_state& r = requests_[req];
  r.blocks = std::move(blocks);
  r.layout = request_layout(r.blocks, options_.block_size);
  r.target_tokens = target_tokens;
  if (!options_.storage)
    return {};
  std::vector<uint64_t> keys = storage_keys_past_match(r);
  r.cached_at_ready = r.probed_from;
  return keys;
}

std::vector<uint64_t> controller_core::storage_keys_past_match(request_state& r) {
  std::vector<uint64_t> keys;
  if (model_.options().caching == prefix_caching::off)
    return keys;
  model_.match(r.blocks.data(), r.blocks.size(), match_);
  r.probed_from = static_cast<uint32_t>(match_.nodes.size());
  // A full hit recomputes the block holding its last token: loading it would be for nothing.
  size_t end = r.blocks.size();
  if (r.target_tokens > 0 && r.layout.listed_tokens() >= r.target_tokens)
    end = r.layout.blocks_for(r.target_tokens) - 1;
  for (size_t i = match_.nodes.size(); i < end; ++i)
    keys.push_back(tracker_.storage_key_of(r.blocks[i].hash));
  if (!keys.empty())
    ++storage_probes_;
  return keys;
}

std::vector<uint64_t> controller_core::on_readmission(request_id req, uint64_t target_tokens) {
  block_event_batch batch(options_.events);
  request_state& r = requests_.at(req);
  r.target_tokens = target_tokens;
  if (!options_.storage || r.admitted || !r.prefetch_path.empty())
    return {};
  ++(r.preempted ? preemption_.readmission_lookups : prefetch_.admission_lookups);
  r.lookup_before_admission = true;
  std::vector<uint64_t> keys = storage_keys_past_match(r);
  r.cached_at_ready = r.probed_from;
  return keys;
}

uint64_t controller_core::prefetch_tokens(request_id req) const {
  const request_state& r = requests_.at(req);
  uint64_t tokens = 0;
  for (uint32_t i = 0; i < r.prefetched; ++i)
    tokens += r.layout.tokens_of(r.prefetch_first + i);
  return tokens;
}

void controller_core::note_ready_early(bool by_timeout) {
  ++prefetch_.ready_early;
  prefetch_.timeouts += by_timeout;
}

bool controller_core::on_exists(request_id req, uint32_t leading, std::vector<transfer>& out) {
  block_event_batch batch(options_.events);
  request_state& r = requests_.at(req);
  uint32_t probed_from = r.probed_from;
  if (leading == 0)
    return false;
  // The tree may have changed during the lookup: load only what still follows its prefix.
  model_.match(r.blocks.data(), r.blocks.size(), match_);
  size_t end = match_.nodes.size();
  size_t last = probed_from + size_t{leading};
  if (end < probed_from || end >= last)
    return false;
  // SGLang's prefetch_threshold: a short match is not worth a storage round trip.
  uint64_t found_tokens = 0;
  for (size_t i = end; i < last; ++i)
    found_tokens += r.layout.tokens_of(static_cast<uint32_t>(i));
  if (found_tokens < options_.prefetch_threshold_tokens) {
    ++prefetch_.below_threshold;
    return false;
  }
  r.prefetch_path = match_.nodes;
  r.prefetch_first = static_cast<uint32_t>(end);
  r.prefetched = 0;
  model_.hold(r.prefetch_path.data(), r.prefetch_path.size());
  std::vector<transfer_order> orders;
  node_id parent = end > 0 ? match_.nodes.back() : root_node;
  for (size_t i = end; i < last; ++i) {
    auto loaded = model_.begin_load(parent, r.blocks[i], orders);
    if (!loaded)
      break;
    r.prefetch_path.push_back(parent = *loaded);
    if (r.loaded.size() < r.blocks.size())
      r.loaded.resize(r.blocks.size(), 0);
    r.loaded[i] = 1;
    ++r.prefetched;
  }
  r.cached_at_ready = r.prefetch_first + r.prefetched;
  if (r.prefetched == 0) {
    model_.release_from_tail(r.prefetch_path);
    r.prefetch_path.clear();
    tracker_.batch(orders, out);  // stores of host evictions, if any
    return false;
  }
  size_t first = out.size();
  tracker_.batch(orders, out);
  for (size_t i = first; i < out.size(); ++i)
    if (out[i].kind == transfer_kind::load)
      load_owner_[r.load_transfer = out[i].id] = req;
  ++prefetch_.started;
  return true;
}

}  // namespace kvtier
