// Step commits: computed blocks join the tree, then finishes, preemptions, grows and admits, in
// that order, and the transfers the step must wait for.

#include "model/controller/controller_core.hpp"

#include <algorithm>

namespace kvtier {

namespace {

// The engine hands the id of a block it dropped out again right after the step (docs/protocol.md,
// version 3): a copy still reading the block, or a device copy below it, finishes first.
void wait_for_readers(const radix_tree& tree, const transfer_tracker& tracker, block_hash hash,
                      std::vector<uint64_t>& barriers) {
  std::vector<node_id> stack(1, tree.find(hash));
  while (!stack.empty() && stack.back() != root_node) {
    node_id x = stack.back();
    stack.pop_back();
    if (!tree.node(x).ready(tier::device))
      continue;
    tracker.users_of_device(tree.node(x).block_in(tier::device), barriers);
    tree.for_each_child(x, [&](node_id c) { stack.push_back(c); });
  }
}

}  // namespace

void controller_core::commit_computed(request_state& r, uint32_t tokens,
                                      std::vector<transfer_order>& orders) {
  uint32_t complete = std::min<uint32_t>(r.layout.complete_within(tokens),
                                         static_cast<uint32_t>(r.table.size()));
  // Without prefix caching no block joins the tree: each stays the request's own and is freed
  // with it. Joining it, a block another request computed too would be held twice (its node's
  // block and the request's own), and a request that needs the whole device could never run.
  if (model_.options().caching == prefix_caching::off) {
    r.committed = std::max(r.committed, complete);
    return;
  }
  constexpr uint32_t ahead = 8;
  for (uint32_t i = r.committed; i < std::min(complete, r.committed + ahead); ++i)
    model_.tree().prefetch(r.blocks[i].hash);
  for (uint32_t i = r.committed; i < complete; ++i) {
    if (i + ahead < complete)
      model_.tree().prefetch(r.blocks[i + ahead].hash);
    node_id parent = i > 0 ? r.path[i - 1] : root_node;
    commit_result c = model_.commit(parent, r.blocks[i], r.table[i], orders, r.backups);
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
  take_deferred_backups(out);
  std::vector<transfer_order>& orders = step_orders_;
  orders.clear();
  g.step = c.step;
  ++commits_;
  // Computed blocks join the tree first, so a finished request's last blocks stay cached.
  for (const token_mark& m : c.computed)
    commit_computed(requests_.at(m.req), m.tokens, orders);
  commit_finished(c, orders);
  commit_preempted(c, g, orders);
  release_protected_if_idle();
  for (block_hash h : c.device_dropped) {
    wait_for_readers(model_.tree(), tracker_, h, inputs.barriers);
    model_.drop_device_copy(h, orders);
  }
  commit_grows_and_admits(c, g, orders, inputs);
  commit_transfers(g, orders, out, inputs);
  g.available_blocks = model_.device_available();
  if (options_.check_every > 0 && commits_ % options_.check_every == 0)
    check(false);
}

void controller_core::commit_finished(const commit& c, std::vector<transfer_order>& orders) {
  for (request_id id : c.finished) {
    request_state& r = requests_.at(id);
    // FastDeploy writes a finished request's cache to storage before freeing it (§7.2),
    // whatever its host policy (write_policy.hpp); a decode instance's prompt blocks came from
    // its prefill instance, which stored them (docs/cluster.md): writing them again would move
    // each byte twice.
    if (r.backups == policy_backups::by_policy)
      model_.store_finished(r.path.data(), r.path.size(), orders);
    release(r);
    requests_.erase(id);
  }
}

void controller_core::commit_preempted(const commit& c, grant& g,
                                       std::vector<transfer_order>& orders) {
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
}

void controller_core::commit_grows_and_admits(const commit& c, grant& g,
                                              std::vector<transfer_order>& orders,
                                              step_inputs& inputs) {
  for (size_t i = 0; i < c.grows.size(); ++i) {
    request_state& r = requests_.at(c.grows[i].req);
    size_t held = r.table.size();
    if (!grow(r, c.grows[i].tokens, orders, inputs))
      g.failed_grows.push_back(c.grows[i].req);
    else if (i < c.grow_blocks.size())
      note_engine_blocks(r, c.grow_blocks[i], held);
  }
  bool admitting = true;
  for (size_t i = 0; i < c.admits.size(); ++i) {
    const token_mark& m = c.admits[i];
    admit_result res;
    res.req = m.req;
    admitting = admitting && admit(m.req, m, res, orders, inputs);  // first come first served
    if (res.admitted && i < c.admit_blocks.size())
      note_engine_blocks(requests_.at(m.req), c.admit_blocks[i], 0);
    g.admits.push_back(res);
  }
}

void controller_core::commit_transfers(const grant& g, std::vector<transfer_order>& orders,
                                       std::vector<transfer>& out, step_inputs& inputs) {
  if (backups_wait_for_reply())
    backups_deferred_ = true;
  else
    model_.collect_backups(orders);
  if (!produced_.empty()) {
    tracker_.fill(produced_, out);  // before the backups that read those blocks
    produced_.clear();
  }
  size_t first = out.size();
  tracker_.batch(orders, out);
  to_engine_blocks(out, 0, inputs.barriers);
  for (size_t i = first; i < out.size(); ++i)
    if (out[i].kind == transfer_kind::swap_in) {
      inputs.swap_in = out[i].id;
      inputs.swap_in_blocks = static_cast<uint32_t>(out[i].blocks.size());
    }
  if (options_.log && inputs.swap_in != 0)
    for (const admit_result& a : g.admits)
      if (a.admitted && a.host_blocks + a.storage_blocks > 0)
        swap_in_log_.push_back({inputs.swap_in, a.req, a.host_blocks + a.storage_blocks});
  for (block_id b : inputs.written)
    tracker_.users_of_device(b, inputs.barriers);
  std::sort(inputs.barriers.begin(), inputs.barriers.end());
  inputs.barriers.erase(std::unique(inputs.barriers.begin(), inputs.barriers.end()),
                        inputs.barriers.end());
}

// A backup reading an engine id this step names again (one the engine freed and hands out anew)
// must run before the step's swap-in writes it and be one of the step's barriers
// (controller_engine_blocks.cpp): such a step collects its backups before its grant.
bool controller_core::backups_wait_for_reply() const {
  if (options_.backups != backup_timing::after_reply)
    return false;
  if (engine_written_.empty())
    return true;
  return !model_.any_backup_reads([&](block_id b) {
    uint32_t id = b < engine_blocks_.size() ? engine_blocks_[b] : UINT32_MAX;
    return engine_written_.contains(id == UINT32_MAX ? b : id);
  });
}

void controller_core::collect_deferred_backups(std::vector<transfer>& out) {
  if (!backups_deferred_)
    return;
  block_event_batch batch(options_.events);
  take_deferred_backups(out);
}

void controller_core::take_deferred_backups(std::vector<transfer>& out) {
  if (!backups_deferred_)
    return;
  backups_deferred_ = false;
  std::vector<transfer_order>& orders = step_orders_;
  orders.clear();
  model_.collect_backups(orders);
  if (orders.empty())
    return;
  size_t first = out.size();
  tracker_.batch(orders, out);
  std::vector<uint64_t> barriers;
  to_engine_blocks(out, first, barriers);
}

}  // namespace kvtier
