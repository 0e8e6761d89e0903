#include "model/controller/controller_core.hpp"

#include <algorithm>

#include "core/check.hpp"

namespace kvtier {

controller_core::controller_core(const cache_options& cache, const controller_options& options)
  : model_(cache), options_(options), tracker_(options.storage_namespace) {
  model_.set_event_sink(options.events);
}

// -- arrival and storage prefetch ------------------------------------------------------------------

prefix_hit controller_core::lookup(const std::vector<cache_block>& blocks) {
  model_.match(blocks.data(), blocks.size(), match_);
  return {match_.device, match_.host, match_.device_tokens, match_.host_tokens};
}

std::vector<uint64_t> controller_core::on_arrival(request_id req, std::vector<cache_block> blocks) {
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
  if (!options_.storage)
    return {};
  return storage_keys_past_match(r);
}

std::vector<uint64_t> controller_core::storage_keys_past_match(request_state& r) {
  std::vector<uint64_t> keys;
  model_.match(r.blocks.data(), r.blocks.size(), match_);
  r.probed_from = static_cast<uint32_t>(match_.nodes.size());
  for (size_t i = match_.nodes.size(); i < r.blocks.size(); ++i)
    keys.push_back(tracker_.storage_key_of(r.blocks[i].hash));
  if (!keys.empty())
    ++storage_probes_;
  return keys;
}

std::vector<uint64_t> controller_core::on_readmission(request_id req) {
  block_event_batch batch(options_.events);
  request_state& r = requests_.at(req);
  if (!options_.storage || r.admitted || !r.prefetch_path.empty())
    return {};
  ++preemption_.readmission_lookups;
  return storage_keys_past_match(r);
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
  model_.hold(r.prefetch_path.data(), r.prefetch_path.size());
  std::vector<transfer_order> orders;
  node_id parent = end > 0 ? match_.nodes.back() : root_node;
  for (size_t i = end; i < last; ++i) {
    auto loaded = model_.begin_load(parent, r.blocks[i], orders);
    if (!loaded)
      break;
    r.prefetch_path.push_back(parent = *loaded);
    ++r.prefetched;
  }
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

// -- steps ------------------------------------------------------------------------------------------

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
    reply.matches.push_back({id, match_.device, match_.host, match_.device_tokens,
                             match_.host_tokens, match_.device_idle});
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

void controller_core::drop_prefetch_hold(request_state& r) {
  model_.release_from_tail(r.prefetch_path);
  if (r.protected_hold) {
    KVTIER_ASSERT(protected_blocks_ >= r.prefetch_path.size());
    protected_blocks_ -= static_cast<uint32_t>(r.prefetch_path.size());
    r.protected_hold = false;
  }
  r.prefetch_path.clear();
}

void controller_core::release(request_state& r) {
  model_.release_from_tail(r.path);
  for (size_t i = 0; i < r.table.size(); ++i)
    if (r.owned[i])
      model_.free_device(r.table[i]);
  drop_prefetch_hold(r);
  r.path.clear();
  r.table.clear();
  r.owned.clear();
  r.prefetched = 0;
  r.committed = 0;
  if (r.admitted) {
    KVTIER_ASSERT(admitted_ > 0);
    --admitted_;
  }
  r.admitted = false;
}

// Protected prefetches hold their prefix (device blocks among it) until their request is
// admitted. With nothing running, no finishing request will ever free blocks for the queue's
// head: let every such hold go, in request order, so that the head can be admitted.
void controller_core::release_protected_if_idle() {
  if (admitted_ > 0 || protected_blocks_ == 0)
    return;
  std::vector<request_id> holders;
  for (const auto& [id, r] : requests_)
    if (r.protected_hold)
      holders.push_back(id);
  std::sort(holders.begin(), holders.end());
  for (request_id id : holders) {
    drop_prefetch_hold(requests_.at(id));
    ++prefetch_.protected_released;
  }
}

void controller_core::preempt(request_id id, uint32_t computed_tokens,
                              std::vector<transfer_order>& orders, std::vector<uint64_t>* written) {
  request_state& r = requests_.at(id);
  if (options_.preemption != preemption_mode::recompute && r.admitted) {
    // Its full generated (unlisted) blocks get names, so that it can find them again; they join
    // the tree like any computed block, and then every computed block is saved.
    uint32_t named = saved_private_blocks(r.layout, computed_tokens, options_.block_size);
    auto held = static_cast<uint32_t>(r.table.size());
    named = held > r.layout.listed() ? std::min(named, held - r.layout.listed()) : 0;
    if (named > 0) {
      name_private_blocks(id, named, options_.block_size, r.blocks);
      r.layout.list_private_blocks(named);
      preemption_.named_blocks += named;
    }
    commit_computed(r, computed_tokens, orders);
    bool store = options_.preemption == preemption_mode::save_to_storage;
    for (node_id n : r.path) {
      const tree_node& x = model_.tree().node(n);
      if (!x.ready(tier::device))
        continue;
      size_t first = orders.size();
      bool writes = false;
      if (!model_.save_for_preemption(n, store, orders, &writes)) {
        ++preemption_.unsaved_blocks;
        continue;
      }
      ++preemption_.saved_blocks;
      if (written && writes)
        written->push_back(tracker_.storage_key_of(x.hash));
      for (size_t i = first; i < orders.size(); ++i)
        if (orders[i].kind == transfer_kind::backup && orders[i].node == n)
          preemption_reads_[orders[i].device_block] = orders[i].id;
    }
  }
  release(r);
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
  model_.acquire_matched(path.data(), path.size());
  // Hits beyond the blocks this step covers are not taken (the scheduler planned fewer).
  uint32_t need = r.layout.blocks_for(m.tokens);
  uint32_t hits = std::min<uint32_t>(static_cast<uint32_t>(path.size()), need);
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
    bool prefetched = i >= r.prefetch_first && i - r.prefetch_first < r.prefetched;
    tier from = i < device ? tier::device : prefetched ? tier::storage : tier::host;
    storage += from == tier::storage;
    at(tokens, from) += r.layout.tokens_of(i);
  }
  // A protected prefetch held its blocks until now; under best_effort or timeout its loads may
  // still be in flight (what has not landed is computed).
  drop_prefetch_hold(r);
  r.prefetched = 0;
  ++admitted_;
  r.path = std::move(path);
  r.table.clear();
  r.owned.clear();
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

void controller_core::commit_computed(request_state& r, uint32_t tokens,
                                      std::vector<transfer_order>& orders) {
  uint32_t complete = std::min<uint32_t>(r.layout.complete_within(tokens),
                                         static_cast<uint32_t>(r.table.size()));
  constexpr uint32_t ahead = 8;
  for (uint32_t i = r.committed; i < std::min(complete, r.committed + ahead); ++i)
    model_.tree().prefetch(r.blocks[i].hash);
  for (uint32_t i = r.committed; i < complete; ++i) {
    if (i + ahead < complete)
      model_.tree().prefetch(r.blocks[i + ahead].hash);
    node_id parent = i > 0 ? r.path[i - 1] : root_node;
    commit_result c = model_.commit(parent, r.blocks[i], r.table[i], orders);
    if (c.adopted)
      r.owned[i] = 0;
    if (options_.verify)
      produced_.push_back({r.table[i], 0, r.blocks[i].hash, 0});
    r.path.push_back(c.node);
  }
  r.committed = std::max(r.committed, complete);
}

void controller_core::on_commit(const commit& c, grant& g, std::vector<transfer>& out,
                                step_inputs& inputs) {
  block_event_batch batch(options_.events);
  std::vector<transfer_order> orders;
  g.step = c.step;
  ++commits_;
  // Computed blocks join the tree first, so a finished request's last blocks stay cached.
  for (const token_mark& m : c.computed)
    commit_computed(requests_.at(m.req), m.tokens, orders);
  for (request_id id : c.finished) {
    release(requests_.at(id));
    requests_.erase(id);
  }
  std::vector<uint64_t> written;
  for (const token_mark& m : c.preempted) {
    if (!c.drop_preempted) {
      preempt(m.req, m.tokens, orders);
      continue;
    }
    // A decode instance's victim leaves it (docs/fastdeploy.md §4): saved and released, then
    // forgotten.
    size_t before = written.size();
    preempt(m.req, m.tokens, orders, &written);
    g.dropped_key_counts.push_back(static_cast<uint32_t>(written.size() - before));
    requests_.erase(m.req);
  }
  g.dropped_keys = std::move(written);
  release_protected_if_idle();
  for (const token_mark& m : c.grows)
    if (!grow(requests_.at(m.req), m.tokens, orders, inputs))
      g.failed_grows.push_back(m.req);
  bool admitting = true;
  for (const token_mark& m : c.admits) {
    admit_result res;
    res.req = m.req;
    admitting = admitting && admit(m.req, m, res, orders, inputs);  // first come first served
    g.admits.push_back(res);
  }
  model_.collect_backups(orders);
  if (!produced_.empty()) {
    tracker_.fill(produced_, out);  // before the backups that read those blocks
    produced_.clear();
  }
  size_t first = out.size();
  tracker_.batch(orders, out);
  for (size_t i = first; i < out.size(); ++i)
    if (out[i].kind == transfer_kind::swap_in)
      inputs.swap_in = out[i].id;
  if (options_.log && inputs.swap_in != 0)
    for (const admit_result& a : g.admits)
      if (a.admitted && a.host_blocks + a.storage_blocks > 0)
        swap_in_log_.push_back({inputs.swap_in, a.req, a.host_blocks + a.storage_blocks});
  for (block_id b : inputs.written)
    tracker_.users_of_device(b, inputs.barriers);
  std::sort(inputs.barriers.begin(), inputs.barriers.end());
  inputs.barriers.erase(std::unique(inputs.barriers.begin(), inputs.barriers.end()),
                        inputs.barriers.end());
  g.available_blocks = model_.device_available();
  if (options_.check_every > 0 && commits_ % options_.check_every == 0)
    check(false);
}

void controller_core::check_step_start(const step_inputs& inputs) {
  for (block_id b : inputs.written) {
    invariants_.expect(model_.pool(tier::device).pins(b) == 0, [&] {
      return "device block " + std::to_string(b) + " is computed into while a transfer touches it";
    });
    auto read = preemption_reads_.find(b);
    invariants_.expect(read == preemption_reads_.end(), [&] {
      return "reuse barrier: device block " + std::to_string(b) +
             " is computed into while the preemption save reading it (order " +
             std::to_string(read->second) + ") is in flight";
    });
  }
}

// -- transfers ----------------------------------------------------------------------------------

void controller_core::on_transfer_done(const transfer_done& d, std::vector<transfer>& out,
                                       std::vector<request_id>& landed) {
  block_event_batch batch(options_.events);
  auto owner = load_owner_.find(d.id);
  std::vector<transfer_order> orders = tracker_.finish(d.id);
  for (const transfer_order& o : orders) {
    auto read = preemption_reads_.find(o.device_block);
    if (o.kind == transfer_kind::backup && read != preemption_reads_.end() && read->second == o.id)
      preemption_reads_.erase(read);
  }
  // The request that a load was for; under best_effort and timeout it may have been admitted,
  // or even have finished, before its loads landed.
  request_state* holder = nullptr;
  if (owner != load_owner_.end()) {
    auto it = requests_.find(owner->second);
    if (it != requests_.end())
      holder = &it->second;
  }
  if (!d.ok) {
    // Only a storage load may fail (the block was evicted between lookup and read): the request
    // goes on without its prefetch, and the nodes that were being filled go.
    invariants_.expect(owner != load_owner_.end(), [&] {
      return "transfer " + std::to_string(d.id) + " failed: " + d.error;
    });
    for (const transfer_order& o : orders)
      model_.fail(o);
    if (owner != load_owner_.end()) {
      if (holder) {
        drop_prefetch_hold(*holder);
        if (!holder->admitted)
          holder->prefetched = 0;
      }
      for (auto it = orders.rbegin(); it != orders.rend(); ++it)
        model_.discard_if_bare(it->node, it->generation);
      ++failed_loads_;
    }
  } else {
    std::vector<transfer_order> follow;
    constexpr size_t ahead = 8;
    for (size_t i = 0; i < std::min(ahead, orders.size()); ++i)
      model_.prefetch(orders[i]);
    for (size_t i = 0; i < orders.size(); ++i) {
      if (i + ahead < orders.size())
        model_.prefetch(orders[i + ahead]);
      model_.complete(orders[i], follow);
    }
    tracker_.batch(follow, out);
  }
  if (owner != load_owner_.end()) {
    if (holder && !holder->admitted) {
      // Landed ahead of its admission: protected up to prefetch_capacity_blocks, else free to
      // go under host pressure (see the header).
      size_t n = holder->prefetch_path.size();
      if (d.ok && n > 0 && !holder->protected_hold
          && protected_blocks_ + n <= options_.prefetch_capacity_blocks) {
        holder->protected_hold = true;
        protected_blocks_ += static_cast<uint32_t>(n);
        ++prefetch_.protected_holds;
      } else if (!holder->protected_hold) {
        drop_prefetch_hold(*holder);
      }
      landed.push_back(owner->second);
    }
    load_owner_.erase(owner);
    release_protected_if_idle();
  }
}

// -- observers -----------------------------------------------------------------------------------

void controller_core::check(bool quiescent) {
  check_invariants(model_, quiescent, invariants_);
  absl::flat_hash_map<node_id, uint32_t> holds;
  uint64_t owned = 0;
  for (const auto& [id, r] : requests_) {
    for (node_id n : r.path)
      ++holds[n];
    for (node_id n : r.prefetch_path)
      ++holds[n];
    for (uint8_t o : r.owned)
      owned += o;
  }
  for (node_id n : model_.tree().live_nodes()) {
    uint32_t expected = holds.contains(n) ? holds[n] : 0;
    invariants_.expect(model_.tree().node(n).ref_count == expected, [&] {
      return "node " + std::to_string(n) + ": ref count " +
             std::to_string(model_.tree().node(n).ref_count) + " but " +
             std::to_string(expected) + " request holds";
    });
  }
  invariants_.expect(owned == model_.private_device_blocks(),
                     [] { return std::string{"private device blocks equal what requests own"}; });
  uint64_t protected_held = 0;
  for (const auto& [id, r] : requests_)
    protected_held += r.protected_hold ? r.prefetch_path.size() : 0;
  invariants_.expect(protected_held == protected_blocks_ &&
                       protected_blocks_ <= options_.prefetch_capacity_blocks,
                     [&] {
                       return "protected prefetches hold " + std::to_string(protected_held) +
                              " blocks, counted " + std::to_string(protected_blocks_) +
                              ", capacity " + std::to_string(options_.prefetch_capacity_blocks);
                     });
  // The reuse barrier's ledger: each block a preemption save reads is pinned by that order.
  for (const auto& [block, order] : preemption_reads_)
    invariants_.expect(model_.pool(tier::device).pins(block) > 0, [&, b = block, o = order] {
      return "reuse barrier: device block " + std::to_string(b) + " is not pinned, yet preemption save " +
             std::to_string(o) + " is reading it";
    });
  if (quiescent) {
    invariants_.expect(requests_.empty(), [&] {
      return std::to_string(requests_.size()) + " requests still hold blocks at the end";
    });
    invariants_.expect(tracker_.outstanding_count() == 0,
                       [] { return std::string{"no transfer outstanding at the end"}; });
    invariants_.expect(preemption_reads_.empty(),
                       [] { return std::string{"no preemption save reading at the end"}; });
  }
}

controller_report controller_core::report() const {
  controller_report r;
  const cache_counters& c = model_.counters();
  r.device_evictions = c.device_evictions;
  r.host_evictions = c.host_evictions;
  r.dropped = c.dropped;
  r.backups = c.backups;
  r.backups_skipped = c.backups_skipped;
  r.write_backs = c.write_backs;
  r.swap_ins = c.swap_ins;
  r.loads = c.loads;
  r.stores = c.stores;
  r.storage_probes = storage_probes_;
  r.failed_loads = failed_loads_;
  r.transfers = tracker_.issued();
  r.copies_in_flight = tracker_.outstanding_count();
  r.invariant_checked = invariants_.checked;
  r.invariant_violations = invariants_.violations;
  r.invariant_messages = invariants_.messages;
  r.tree_nodes = model_.tree().size();
  r.device_used = model_.pool(tier::device).used_count();
  r.host_used = model_.pool(tier::host).used_count();
  r.swap_ins_by_request = swap_in_log_;
  r.preemption = preemption_;
  r.preemption.d2h_blocks = c.preemption_backups;
  r.preemption.stored_blocks = c.preemption_stores;
  r.prefetch = prefetch_;
  return r;
}

}  // namespace kvtier
