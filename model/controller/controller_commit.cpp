// Step commits: computed blocks join the tree, then finishes, preemptions, grows and admits, in
// that order, and the transfers the step must wait for.

#include "model/controller/controller_core.hpp"

#include <algorithm>

namespace kvtier {

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
  std::vector<transfer_order> orders;
  g.step = c.step;
  ++commits_;
  // Computed blocks join the tree first, so a finished request's last blocks stay cached.
  for (const token_mark& m : c.computed)
    commit_computed(requests_.at(m.req), m.tokens, orders);
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

}  // namespace kvtier
