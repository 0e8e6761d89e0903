#include "sim/hitrate/hitrate_replay.hpp"

#include <algorithm>

#include "core/check.hpp"
#include "runtime/config/cluster_config.hpp"
#include "runtime/config/keys.hpp"

namespace kvtier {

namespace {
// Room made up front for the indexes (blocks): tiers larger than this grow as they fill.
constexpr uint64_t reserve_limit = uint64_t{1} << 21;
}  // namespace

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
  // A store's key is made once, when its index slot is prefetched `ahead` orders early (orders
  // added meanwhile, follow-up stores, make theirs when they come).
  constexpr size_t ahead = 8;
  for (size_t i = 0; i < orders_.size(); ++i) {
    transfer_order o = orders_[i];
    if (storage_ && i + ahead < orders_.size()
        && orders_[i + ahead].kind == transfer_kind::store) {
      key_ahead& k = keys_ahead_[(i + ahead) % keys_ahead_.size()];
      k = {drained_ + i + ahead, key_of(orders_[i + ahead].hash)};
      storage_->prefetch(k.key);
    }
    if (o.kind == transfer_kind::store) {
      KVTIER_ASSERT(storage_);
      const key_ahead& k = keys_ahead_[i % keys_ahead_.size()];
      storage_->put(k.order == drained_ + i ? k.key : key_of(o.hash));
      ++totals_.storage_inserts;
    } else {
      if (o.kind == transfer_kind::load)
        storage_->touch(key_of(o.hash));
      if (o.kind != transfer_kind::swap_in)
        ++totals_.host_inserts;
    }
    model_.complete(o, orders_);
  }
  drained_ += orders_.size();
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
  const auto n = static_cast<uint32_t>(blocks.size());
  out = request_outcome{};
  out.blocks = n;
  ++totals_.requests;
  totals_.blocks += n;
  totals_.input_tokens += r.input_tokens;
  totals_.output_tokens += r.output_tokens;
  const uint32_t in_storage = match_at_arrival(r, blocks);
  const uint32_t placed = make_device_room(blocks, out);
  const uint32_t loaded = load_from_storage(blocks, in_storage);
  storage_last_found_ = storage_last_found_ && loaded == in_storage;
  count_hits(r, blocks, loaded, out);
  const uint32_t end = place_on_device(blocks, placed, loaded);
  // Backups go parent first (docs/design.md, "Write policies"): the blocks placed on the device
  // before those that only pass through it.
  model_.collect_backups(orders_);
  drain();
  pass_through_device(blocks, end);
  finish_request();
}

// The longest cached prefix over device, host, then storage (the longest leading run of the
// blocks after the tree's match that storage holds); the tree's part is held. Returns the
// storage run worth loading.
uint32_t hitrate_replay::match_at_arrival(const trace_request& r,
                                          const std::vector<cache_block>& blocks) {
  const auto n = static_cast<uint32_t>(blocks.size());
  model_.match(blocks.data(), n, match_);
  totals_.lookups += std::min<uint64_t>(n, match_.nodes.size() + 1);
  model_.acquire_matched(match_.nodes.data(), match_.nodes.size());
  const uint32_t in_tree = match_.device + match_.host;
  uint32_t stored = storage_ && model_.options().caching == prefix_caching::on
                      ? storage_run(blocks, in_tree)
                      : 0;
  // A full hit's last block is computed (uncount_recomputed_hit): one that only storage holds is
  // not loaded for nothing, as the timed replay's storage lookup does not ask for it, nor is a
  // host copy swapped in (docs/design.md, "Hit ratio").
  uint64_t listed = 0;
  for (const cache_block& b : blocks)
    listed += b.tokens;
  const bool full_hit = n > 0 && in_tree + stored == n && listed >= r.input_tokens;
  host_last_computed_ = full_hit && stored == 0 && match_.host > 0;
  storage_last_found_ = full_hit && stored > 0;
  if (full_hit && stored > 0)
    --stored;
  path_.assign(match_.nodes.begin(), match_.nodes.end());
  return stored;
}

// Device blocks for what stays on the device (as much of the request as fits), evicting idle
// leaves by the write policy. Returns how many blocks past the device hits were placed.
uint32_t hitrate_replay::make_device_room(const std::vector<cache_block>& blocks,
                                          request_outcome& out) {
  const uint32_t need = static_cast<uint32_t>(blocks.size()) - match_.device;
  const uint32_t placed = std::min(need, model_.device_available());
  out.uncached_blocks = need - placed;
  totals_.uncached_blocks += out.uncached_blocks;
  fresh_.clear();
  allocate_in_host_sized_chunks(placed);
  return placed;
}

// The storage hits are loaded into host memory, the leading ones the host tier has room for and
// storage still holds (the device's write-backs may have stored over them), as the timed
// replay's prefetch loads them before the admission; only what is loaded is a hit, and it
// counts as a match of the request (the admission matches it).
uint32_t hitrate_replay::load_from_storage(const std::vector<cache_block>& blocks,
                                           uint32_t in_storage) {
  const uint32_t first = match_.device + match_.host;
  uint32_t loaded = 0;
  for (; loaded < in_storage; ++loaded) {
    const cache_block& b = blocks[first + loaded];
    // The get holds a lease from before its host block is taken, so the stores that taking it
    // makes (on_host_evict) cannot evict the block it reads (docs/design.md, step 3).
    if (model_.host_room() == 0 || !storage_->lease(key_of(b.hash)))
      break;
    node_id parent = path_.empty() ? root_node : path_.back();
    auto node = model_.begin_load(parent, b, orders_);
    if (node)
      drain();
    storage_->release_lease(key_of(b.hash));
    if (!node)
      break;
    path_.push_back(*node);
    model_.count_hits(&*node, 1);
  }
  return loaded;
}

void hitrate_replay::count_hits(const trace_request& r, const std::vector<cache_block>& blocks,
                                uint32_t loaded, request_outcome& out) {
  const uint32_t first = match_.device + match_.host;
  out.hit_blocks = {match_.device, match_.host, loaded};
  at(out.hit_tokens, tier::device) = match_.device_tokens;
  at(out.hit_tokens, tier::host) = match_.host_tokens;
  for (uint32_t i = first; i < first + loaded; ++i)
    at(out.hit_tokens, tier::storage) += blocks[i].tokens;
  uncount_recomputed_hit(r, blocks, out);
  for (tier t : all_tiers) {
    at(totals_.hit_blocks, t) += at(out.hit_blocks, t);
    at(totals_.hit_tokens, t) += at(out.hit_tokens, t);
  }
}

// Every block that stays goes to the device: host hits and loaded blocks swapped in, the rest
// computed (a full hit's last block too). Returns the end of what was placed.
uint32_t hitrate_replay::place_on_device(const std::vector<cache_block>& blocks, uint32_t placed,
                                         uint32_t loaded) {
  const uint32_t in_tree = match_.device + match_.host;
  const uint32_t end = match_.device + placed;
  size_t next = 0;
  for (uint32_t i = match_.device; i < end; ++i) {
    if (i + 8 < end)
      model_.tree().prefetch(blocks[i + 8].hash);
    const bool computed_hit = host_last_computed_ && i + 1 == in_tree;
    if (i < in_tree + loaded && !computed_hit) {
      model_.swap_in(path_[i], fresh_[next++], orders_);
      continue;
    }
    if (model_.options().caching == prefix_caching::off) {
      model_.free_device(fresh_[next++]);  // no block joins the tree (docs/design.md)
      continue;
    }
    node_id parent = i == 0 ? root_node : path_[i - 1];
    commit_result c = model_.commit(parent, blocks[i], fresh_[next], orders_);
    if (computed_hit) {  // a full hit's last block, held as a match: computed into its own block
      KVTIER_ASSERT(c.adopted && c.node == path_[i]);
      model_.release(&c.node, 1);
    } else {
      if (!c.adopted)
        model_.free_device(fresh_[next]);
      else if (storage_last_found_ && i + 1 == blocks.size())
        model_.count_hits(&c.node, 1);
      path_.push_back(c.node);
    }
    ++next;
  }
  KVTIER_ASSERT(next == fresh_.size());
  drain();
  totals_.inserts += end;
  return end;
}

// What did not fit on the device still leaves it as any computed block does (write policy).
void hitrate_replay::pass_through_device(const std::vector<cache_block>& blocks, uint32_t end) {
  const auto n = static_cast<uint32_t>(blocks.size());
  // Host hits that did not fit stay in host memory; the blocks after them pass through.
  for (auto i = std::max<uint32_t>(end, static_cast<uint32_t>(path_.size()));
       i < n && path_.size() == i; ++i) {
    node_id parent = i == 0 ? root_node : path_[i - 1];
    auto kept = model_.pass_through_device(parent, blocks[i], orders_,
                                           storage_last_found_ && i + 1 == n);
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
  model_.collect_backups(orders_);  // those the blocks passing through the device queued
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
