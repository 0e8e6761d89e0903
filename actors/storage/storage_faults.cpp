#include <algorithm>

#include "actors/storage/storage_state.hpp"

namespace kvtier::storage_impl {

// An injected get failure of one stored key (faults.get_fail_probability); drawn only for keys
// the read would find, so that every count is a block a fault kept from being read.
bool get_fails(storage_state& st) {
  if (!st.faults || !st.faults->fail_get())
    return false;
  ++st.report.get_failures;
  return true;
}

// Whether the i-th write of a put lands: not failed by an injected fault, and its node not lost
// since the write began. Counts what did not.
bool write_survived(storage_state& st, const pending_io& io, size_t i) {
  if (io.fail[i]) {
    ++st.report.put_failures;
    return false;
  }
  if (st.node_epoch[st.index->node_of(io.keys[i])] != io.epochs[i]) {
    ++st.report.puts_lost;
    return false;
  }
  return true;
}

namespace {

void set_node_gbps(storage_state& st, uint32_t node, double factor, int64_t at) {
  st.links.links().set_gbps(st.read_link[node], st.options.read_gbps * factor, at);
  st.links.links().set_gbps(st.write_link[node], st.options.write_gbps * factor, at);
}

}  // namespace

// Applies one fault at its instant (the links are there already).
void apply_fault(self_ptr self, const fault_plan::event& e) {
  auto& st = self->state;
  switch (e.what) {
    case fault_plan::kind::node_loss: {
      if (st.index->node_down(e.node))
        return;  // already down: nothing more to lose
      std::vector<uint64_t> lost;
      st.index->drop_node(e.node, &lost);
      ++st.node_epoch[e.node];
      ++st.report.node_losses;
      st.report.keys_lost += lost.size();
      // Gets already answered keep what they read; their leases on the lost keys are gone.
      absl::flat_hash_map<uint64_t, bool> gone;
      for (uint64_t k : lost)
        gone[k] = true;
      for (auto& [id, keys] : st.leases) {
        auto end = std::remove_if(keys.begin(), keys.end(),
                                  [&](uint64_t k) { return gone.contains(k); });
        st.report.reads_lost += static_cast<uint64_t>(keys.end() - end);
        keys.erase(end, keys.end());
      }
      if (st.backend)
        remove_from_backend(self, lost);
      st.faults->applied(e);
      return;
    }
    case fault_plan::kind::node_back:
      st.index->node_up(e.node);
      ++st.report.node_returns;
      return;
    case fault_plan::kind::slow_start:
      if (st.slow[e.node])
        return;
      st.slow[e.node] = 1;
      set_node_gbps(st, e.node, st.faults->options().slow_factor, e.at);
      ++st.report.slow_windows;
      st.faults->applied(e);
      return;
    case fault_plan::kind::slow_end:
      st.slow[e.node] = 0;
      set_node_gbps(st, e.node, 1.0, e.at);
      return;
  }
}

// A timer at the next fault when it falls before the next flow event: a slow window that ends
// must speed up the flows then, not when their earlier estimate comes due. Later faults wait for
// that event (or the next request), so no timer outlives the work in flight: a replay's last
// event stays its last request's.
void arm_fault_wake(self_ptr self) {
  auto& st = self->state;
  if (!st.faults)
    return;
  int64_t at = st.faults->next_at();
  int64_t now = now_of(self);
  if (st.fault_wake <= now)
    st.fault_wake = link_model::never;
  int64_t next_flow_event = st.links.links().next_event();  // never: nothing in flight
  if (next_flow_event == link_model::never || at >= next_flow_event || at >= st.fault_wake)
    return;
  st.fault_wake = at;
  self->delayed_send(self, st.options.clock.until(self->clock(), at), wake_atom_v, uint64_t{1});
}

}  // namespace kvtier::storage_impl
