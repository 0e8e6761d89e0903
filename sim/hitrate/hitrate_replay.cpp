#include "sim/hitrate/hitrate_replay.hpp"

#include <algorithm>

#include "core/check.hpp"

namespace kvtier {

namespace {
// Room made up front for the indexes (blocks): tiers larger than this grow as they fill.
constexpr uint64_t reserve_limit = uint64_t{1} << 21;
}  // namespace

hitrate_replay::hitrate_replay(const replay_config& config, uint64_t check_every)
  : config_(config), check_every_(check_every), model_(config.cache) {
  model_.reserve_nodes(static_cast<uint32_t>(std::min<uint64_t>(
    uint64_t{config.cache.device_blocks} + config.cache.host_blocks, reserve_limit)));
  if (config.storage_blocks > 0) {
    storage_ = std::make_unique<storage_index>(config.storage_blocks, config.storage_nodes,
                                               config.storage_pool);
    storage_->reserve(std::min<uint64_t>(config.storage_blocks, reserve_limit));
  }
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
  const block_pool& host = model_.pool(tier::host);
  for (uint32_t left = n; left > 0;) {
    uint32_t room =
      host.free_count() + host.retired_count() + model_.tree().reclaimable(tier::host);
    uint32_t chunk = write_back ? std::clamp<uint32_t>(room, 1, left) : left;
    bool allocated = model_.allocate_device(chunk, fresh_, orders_);
    KVTIER_ASSERT(allocated);
    drain();
    left -= chunk;
  }
}

// The blocks from `from` on that storage holds and the tree does not, up to the first that
// fails. A storage hit runs on over many blocks, each a probe of an index far beyond the CPU
// caches: each block's key is made once and probed a few blocks ahead.
uint32_t hitrate_replay::storage_run(const std::vector<cache_block>& blocks, uint32_t from) {
  constexpr uint32_t ahead = 8;
  const uint32_t n = static_cast<uint32_t>(blocks.size());
  keys_.resize(n);
  for (uint32_t i = from; i < std::min(n, from + ahead); ++i) {
    keys_[i] = key_of(blocks[i].hash);
    storage_->prefetch(keys_[i]);
  }
  uint32_t stored = 0;
  for (uint32_t i = from; i < n; ++i, ++stored) {
    if (i + ahead < n) {
      keys_[i + ahead] = key_of(blocks[i + ahead].hash);
      storage_->prefetch(keys_[i + ahead]);
      model_.tree().prefetch(blocks[i + ahead].hash);
    }
    ++totals_.lookups;
    if (!storage_->contains(keys_[i]) || model_.tree().find(blocks[i].hash) != root_node)
      break;
  }
  return stored;
}

void hitrate_replay::process(const trace_request& r, const std::vector<cache_block>& blocks,
                             request_outcome& out) {
  const uint32_t n = static_cast<uint32_t>(blocks.size());
  out = request_outcome{};
  out.blocks = n;
  ++totals_.requests;
  totals_.blocks += n;
  totals_.input_tokens += r.input_tokens;
  totals_.output_tokens += r.output_tokens;

  // -- at arrival: the longest cached prefix over device, host, then storage -------------------
  model_.match(blocks.data(), n, match_);
  totals_.lookups += std::min<uint64_t>(n, match_.nodes.size() + 1);
  model_.acquire_matched(match_.nodes.data(), match_.nodes.size());
  const uint32_t in_tree = match_.device + match_.host;
  const uint32_t stored = storage_ && model_.options().caching == prefix_caching::on
                            ? storage_run(blocks, in_tree)
                            : 0;
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

  // -- then every block goes to the device, as far as it fits ----------------------------------
  const uint32_t need = n - match_.device;
  const uint32_t placed = std::min(need, model_.device_available());
  out.uncached_blocks = need - placed;
  totals_.uncached_blocks += out.uncached_blocks;
  fresh_.clear();
  allocate_in_host_sized_chunks(placed);
  path_.assign(match_.nodes.begin(), match_.nodes.end());
  const uint32_t end = match_.device + placed;
  size_t next = 0;
  for (uint32_t i = match_.device; i < end; ++i) {
    if (i + 8 < end)
      model_.tree().prefetch(blocks[i + 8].hash);
    if (i < in_tree) {
      model_.swap_in(path_[i], fresh_[next++], orders_);
      continue;
    }
    node_id parent = i == 0 ? root_node : path_[i - 1];
    if (i < in_tree + stored) {
      if (auto loaded = model_.begin_load(parent, blocks[i], orders_)) {
        drain();
        path_.push_back(*loaded);
        model_.swap_in(*loaded, fresh_[next++], orders_);
        continue;
      }
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
  finish_request(blocks, end);
}

// What did not fit on the device passes through it; then the request finishes.
void hitrate_replay::finish_request(const std::vector<cache_block>& blocks, uint32_t end) {
  const auto n = static_cast<uint32_t>(blocks.size());
  // What did not fit on the device still leaves it as any computed block does (write policy).
  for (uint32_t i = end; i < n && path_.size() == i; ++i) {
    node_id parent = i == 0 ? root_node : path_[i - 1];
    auto kept = model_.pass_through_device(parent, blocks[i], orders_);
    if (!kept)
      break;
    path_.push_back(*kept);
    ++totals_.host_inserts;
    drain();
  }
  // The request finishes: backups due since its commit first, as the timed replay's steps do,
  // then the storage decision (write_policy.hpp).
  model_.collect_backups(orders_);
  drain();
  model_.store_finished(path_.data(), path_.size(), orders_);
  drain();
  std::reverse(path_.begin(), path_.end());  // tail first
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
