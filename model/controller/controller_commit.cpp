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
  take_deferred_work(out);
  std::vector<transfer_order>& orders = step_orders_;
  orders.clear();
  g.step = c.step;
  ++commits_;
  // Computed blocks join the tree first, so a finished request's last blocks stay cached; live,
  // after the reply where nothing before it would see them (commits_wait_for_reply).
  if (commits_wait_for_reply(c)) {
    deferred_commits_ = c.computed;
    deferred_commits_mark_ = model_.backups_queued();
    ++commits_after_reply_;
  } else {
    for (const token_mark& m : c.computed)
      commit_computed(requests_.at(m.req), m.tokens, orders);
  }
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
  if (backups_wait_for_reply()) {
    tree_work_deferred_ = true;
  } else {
    catch_up_commits(orders);
    model_.collect_backups(orders);
  }
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
// The deferred commits' own backups read blocks of running requests, which the engine cannot have
// named again: the queue as it stands is what may read a named id.
bool controller_core::backups_wait_for_reply() const {
  if (options_.tree_work != tree_work_timing::after_reply)
    return false;
  if (engine_written_.empty())
    return true;
  return !model_.any_backup_reads([&](block_id b) {
    uint32_t id = b < engine_blocks_.size() ? engine_blocks_[b] : UINT32_MAX;
    return engine_written_.contains(id == UINT32_MAX ? b : id);
  });
}

// A computed request's blocks can join the tree after the step's grant when nothing the step does
// before it sees them: no admission matches them (chained hashes: an admission whose block at
// the first new position differs matches none of them), none is in the tree already (a node
// another request made: joining it would hold it, out of the evictable set the admissions take
// from), no request of the commit finishes or is preempted (their releases and saves read their
// paths), and the step adds no node of its own meanwhile (only commits add nodes), so that every
// node and backup comes in the step's order. KV events and verified fills keep the step's order
// of changes: not deferred.
bool controller_core::commits_wait_for_reply(const commit& c) const {
  if (options_.tree_work != tree_work_timing::after_reply || c.computed.empty()
      || !c.preempted.empty() || options_.events != nullptr || options_.verify
      || model_.options().caching == prefix_caching::off)
    return false;
  for (const token_mark& m : c.computed) {
    if (std::find(c.finished.begin(), c.finished.end(), m.req) != c.finished.end())
      return false;
    const request_state& r = requests_.at(m.req);
    const uint32_t first = r.committed;
    if (first >= std::min<uint32_t>(r.layout.complete_within(m.tokens),
                                    static_cast<uint32_t>(r.table.size())))
      continue;  // no block completes
    const block_hash hash = r.blocks[first].hash;
    if (model_.tree().find(hash) != root_node)
      return false;
    for (const token_mark& a : c.admits) {
      const request_state& q = requests_.at(a.req);
      if (q.blocks.size() > first && q.blocks[first].hash == hash)
        return false;
    }
  }
  return true;
}

// The deferred commits, in the commit's order; their backups go where the step would have queued
// them, before the holds' that came after.
void controller_core::catch_up_commits(std::vector<transfer_order>& orders) {
  if (deferred_commits_.empty())
    return;
  const size_t from = model_.backups_queued();
  for (const token_mark& m : deferred_commits_)
    commit_computed(requests_.at(m.req), m.tokens, orders);
  model_.queue_backups_before(deferred_commits_mark_, from);
  deferred_commits_.clear();
}

void controller_core::collect_deferred_work(std::vector<transfer>& out) {
  if (!tree_work_deferred_)
    return;
  block_event_batch batch(options_.events);
  take_deferred_work(out);
}

void controller_core::take_deferred_work(std::vector<transfer>& out) {
  if (!tree_work_deferred_)
    return;
  tree_work_deferred_ = false;
  std::vector<transfer_order>& orders = step_orders_;
  orders.clear();
  catch_up_commits(orders);
  model_.collect_backups(orders);
  if (orders.empty())
    return;
  size_t first = out.size();
  tracker_.batch(orders, out);
  std::vector<uint64_t> barriers;
  to_engine_blocks(out, first, barriers);
}

}  // namespace kvtier
