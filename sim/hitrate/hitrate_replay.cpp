#include "sim/hitrate/hitrate_replay.hpp"

#include <algorithm>

#include "core/check.hpp"
#include "runtime/config/cluster_config.hpp"
#include "runtime/config/keys.hpp"

namespace kvtier {

void refuse_unreplayed_keys(const config& c) {
  if (!single_instance(c))
    throw config_error("cluster.instances: --mode hitrate replays one instance's tiers; several "
                       "instances, roles or per-instance overrides need --mode full (or set "
                       "the cache keys themselves)");
  if (c.boolean(keys::cache::output_caching))
    throw config_error("cache.output_caching: --mode hitrate generates no output tokens to "
                       "cache; use --mode full");
}

hitrate_replay::hitrate_replay(const replay_config& config, uint64_t check_every)
  : config_(config), check_every_(check_every), model_(config.cache) {
  if (config.storage_blocks > 0)
    storage_ = std::make_unique<storage_index>(config.storage_blocks, config.storage_nodes,
                                               config.storage_pool);
}

void hitrate_replay::drain() {
  // Orders complete in issue order, so a block's earlier reader always finishes before a later
  // order writes it (transfer_order's contract).
  constexpr size_t ahead = 4;
  for (size_t i = 0; i < orders_.size(); ++i) {
    transfer_order o = orders_[i];
    if (storage_ && i + ahead < orders_.size() && orders_[i + ahead].kind == transfer_kind::store)
      storage_->prefetch(key_of(orders_[i + ahead].hash));
    if (o.kind == transfer_kind::store) {
      KVTIER_ASSERT(storage_);
      storage_->put(key_of(o.hash));
      ++totals_.storage_inserts;
    } else {
      if (o.kind == transfer_kind::load)
        storage_->touch(key_of(o.hash));
      if (o.kind != transfer_kind::swap_in)
        ++totals_.host_inserts;
    }
    model_.complete(o, orders_);
  }
  orders_.clear();
}

// A full hit's last block is computed all the same (the engine needs one token to sample from,
// and it recomputes the whole block, as the timed replay does): it is no hit, so that hits and
// computed tokens add up to the prompt (docs/design.md, "Hit ratio").
void hitrate_replay::uncount_recomputed_hit(const trace_request& r,
                                            const std::vector<cache_block>& blocks,
                                            request_outcome& out) {
  uint32_t hit_blocks = 0;
  uint64_t hit_tokens = 0;
  for (tier t : all_tiers) {
    hit_blocks += at(out.hit_blocks, t);
    hit_tokens += at(out.hit_tokens, t);
  }
  if (hit_blocks == 0 || hit_tokens < r.input_tokens)
    return;
  for (tier t : {tier::storage, tier::host, tier::device}) {
    if (at(out.hit_blocks, t) == 0)
      continue;
    at(out.hit_blocks, t) -= 1;
    at(out.hit_tokens, t) -= blocks[hit_blocks - 1].tokens;
    return;
  }
}

// Under write_back each device victim is written back to host. Victims past the host's room in
// one allocation would be dropped uncopied (the copies still filling cannot be evicted), and
// which ones that is depends on the device's size: a larger device could lower the hit ratio.
// An engine's chunked prefill evicts a few blocks per step, each step's write-backs landed
// before the next: so allocate in chunks of at most the host room, each chunk's write-backs
// landed (drained) before the next (docs/design.md, "Hit ratio").
void hitrate_replay::allocate_in_host_sized_chunks(uint32_t n) {
  const write_decisions& policy = model_.decisions();
  const bool write_back = policy.host_tier && policy.policy == write_policy::write_back;
  for (uint32_t left = n; left > 0;) {
    uint64_t room = model_.host_room();
    auto chunk = write_back ? static_cast<uint32_t>(std::clamp<uint64_t>(room, 1, left)) : left;
    bool allocated = model_.allocate_device(chunk, fresh_, orders_);
    KVTIER_ASSERT(allocated);
    drain();
    left -= chunk;
  }
}

void hitrate_replay::process(const trace_request& r, const std::vector<cache_block>& blocks,
                             request_outcome& out) {
  const auto n = static_cast<uint32_t>(blocks.size());
  out = request_outcome{};
  out.blocks = n;
  ++totals_.requests;
  totals_.blocks += n;
  totals_.input_tokens += r.input_tokens;
  totals_.output_tokens += r.output_tokens;
  const uint32_t stored = match_at_arrival(r, blocks, out);
  const uint32_t end = place_on_device(blocks, stored, out);
  pass_through_device(blocks, end);
  finish_request();
}

// The longest cached prefix over device, host, then storage (the longest leading run of the
// blocks after the tree's match that storage holds), held and counted per tier. Returns the
// storage run to load.
uint32_t hitrate_replay::match_at_arrival(const trace_request& r,
                                          const std::vector<cache_block>& blocks,
                                          request_outcome& out) {
  const auto n = static_cast<uint32_t>(blocks.size());
  model_.match(blocks.data(), n, match_);
  totals_.lookups += std::min<uint64_t>(n, match_.nodes.size() + 1);
  model_.acquire_matched(match_.nodes.data(), match_.nodes.size());
  const uint32_t in_tree = match_.device + match_.host;
  uint32_t stored = 0;
  if (storage_ && model_.options().caching == prefix_caching::on) {
    for (uint32_t i = in_tree; i < n; ++i, ++stored) {
      ++totals_.lookups;
      if (!storage_->contains(key_of(blocks[i].hash))
          || model_.tree().find(blocks[i].hash) != root_node)
        break;
    }
  }
  // A full hit's last block is computed (uncount_recomputed_hit): one that only storage holds is
  // not loaded for nothing, as the timed replay's storage lookup does not ask for it, nor is a
  // host copy swapped in (docs/design.md, "Hit ratio").
  uint64_t listed = 0;
  for (const cache_block& b : blocks)
    listed += b.tokens;
  const bool full_hit = n > 0 && in_tree + stored == n && listed >= r.input_tokens;
  if (full_hit && stored > 0)
    --stored;
  host_last_computed_ = full_hit && stored == 0 && match_.host > 0;
  out.hit_blocks = {match_.device, match_.host, stored};
  at(out.hit_tokens, tier::device) = match_.device_tokens;
  at(out.hit_tokens, tier::host) = match_.host_tokens;
  for (uint32_t i = in_tree; i < in_tree + stored; ++i)
    at(out.hit_tokens, tier::storage) += blocks[i].tokens;
  uncount_recomputed_hit(r, blocks, out);
  for (tier t : all_tiers) {
    at(totals_.hit_blocks, t) += at(out.hit_blocks, t);
    at(totals_.hit_tokens, t) += at(out.hit_tokens, t);
  }
  return stored;
}

// Every block goes to the device, as far as it fits: host hits swapped in, storage hits loaded
// through host, the rest computed. Returns the end of what was placed.
uint32_t hitrate_replay::place_on_device(const std::vector<cache_block>& blocks, uint32_t stored,
                                         request_outcome& out) {
  const auto n = static_cast<uint32_t>(blocks.size());
  const uint32_t in_tree = match_.device + match_.host;
  const uint32_t need = n - match_.device;
  const uint32_t placed = std::min(need, model_.device_available());
  out.uncached_blocks = need - placed;
  totals_.uncached_blocks += out.uncached_blocks;
  fresh_.clear();
  allocate_in_host_sized_chunks(placed);
  path_.assign(match_.nodes.begin(), match_.nodes.end());
  const uint32_t end = match_.device + placed;
  const uint32_t swapped = in_tree - (host_last_computed_ ? 1 : 0);
  size_t next = 0;
  for (uint32_t i = match_.device; i < end; ++i) {
    if (i + 8 < end)
      model_.tree().prefetch(blocks[i + 8].hash);
    if (i < swapped) {
      model_.swap_in(path_[i], fresh_[next++], orders_);
      continue;
    }
    node_id parent = i == 0 ? root_node : path_[i - 1];
    if (i < in_tree) {  // a full hit's last block: computed into a device block of its own
      commit_result c = model_.commit(parent, blocks[i], fresh_[next++], orders_);
      KVTIER_ASSERT(c.adopted && c.node == path_[i]);
      model_.release(&c.node, 1);  // held once, as a match
      continue;
    }
    if (i < in_tree + stored) {
      if (auto loaded = model_.begin_load(parent, blocks[i], orders_)) {
        drain();
        path_.push_back(*loaded);
        model_.swap_in(*loaded, fresh_[next++], orders_);
        continue;
      }
    }
    if (model_.options().caching == prefix_caching::off) {
      model_.free_device(fresh_[next++]);  // no block joins the tree (docs/design.md)
      continue;
    }
    commit_result c = model_.commit(parent, blocks[i], fresh_[next], orders_);
    if (!c.adopted)
      model_.free_device(fresh_[next]);
    ++next;
    path_.push_back(c.node);
  }
  KVTIER_ASSERT(next == fresh_.size());
  drain();
  totals_.inserts += end;
  return end;
}

// What did not fit on the device still leaves it as any computed block does (write policy).
void hitrate_replay::pass_through_device(const std::vector<cache_block>& blocks, uint32_t end) {
  const auto n = static_cast<uint32_t>(blocks.size());
  for (uint32_t i = end; i < n && path_.size() == i; ++i) {
    node_id parent = i == 0 ? root_node : path_[i - 1];
    auto kept = model_.pass_through_device(parent, blocks[i], orders_);
    if (!kept)
      break;
    path_.push_back(*kept);
    ++totals_.host_inserts;
    drain();
  }
}

// The request finishes: backups due since its commit first, as the timed replay's steps do,
// then the storage decision (write_policy.hpp), then its blocks are released, tail first.
void hitrate_replay::finish_request() {
  model_.collect_backups(orders_);
  drain();
  model_.store_finished(path_.data(), path_.size(), orders_);
  drain();
  std::reverse(path_.begin(), path_.end());
  model_.release(path_.data(), path_.size());
  model_.collect_backups(orders_);
  drain();
  if (check_every_ > 0 && totals_.requests % check_every_ == 0) {
    check_invariants(model_, false, invariants_);
    ++passes_;
  }
}

const invariant_report& hitrate_replay::finish() {
  check_invariants(model_, true, invariants_);
  if (storage_)
    invariants_.expect(storage_->size() <= storage_->capacity(),
                       [] { return std::string{"storage holds at most its capacity"}; });
  ++passes_;
  return invariants_;
}

}  // namespace kvtier
