#include <algorithm>
#include <iostream>

#include "actors/storage/storage_state.hpp"

namespace kvtier::storage_impl {

// A failure kind is said on stderr when it first happens, once; the run's end sums them up
// (docs/robustness.md, "Failures said out loud").
void say_once(bool& said, const std::string& what) {
  if (said)
    return;
  said = true;
  std::cerr << "kvtier: storage: " << what << " (counted; summed up at the end)\n";
}

void on_removed(self_ptr self, const pending_io& io) {
  auto& st = self->state;
  st.deletes_in_flight -= std::min<uint64_t>(st.deletes_in_flight, io.keys.size());
}

// After a node came back the index may promise blocks the backend lost (a Redis restarted without
// persistence comes back empty): list what the backend holds and compare.
void check_reconnects(self_ptr self) {
  auto& st = self->state;
  if (!st.backend || !st.backend->asynchronous() || st.reconciling)
    return;
  backend_counters c = st.backend->counters();
  if (c.puts_failed > 0 && !st.said_dropped)
    say_once(st.said_dropped, "a put could not store its block: " +
                                (c.put_error.empty() ? std::string("unknown") : c.put_error));
  if (c.reconnects <= st.reconnects_seen)
    return;
  st.reconnects_seen = c.reconnects;
  st.reconciling = true;
  st.written_since_listing.clear();
  ++st.report.reconciles;
  uint64_t id = st.next_io++;
  pending_io io;
  io.what = pending_io::kind::reconcile;
  st.ios.emplace(id, std::move(io));
  auto me = caf::actor_cast<storage_actor>(self);
  st.backend->list([me, id](std::vector<uint64_t> hashes) {
    storage_backend_done d{id, {}, std::move(hashes), 0};
    caf::anon_send(me, std::move(d));
  });
}

// The listing is in: an indexed block the backend does not hold, on a node it reached, and not
// written since the listing began, is lost. It leaves the index, so no lookup is answered from it.
void on_reconciled(self_ptr self, pending_io&, const storage_backend_done& d) {
  auto& st = self->state;
  st.reconciling = false;
  absl::flat_hash_map<uint64_t, uint8_t> held;
  held.reserve(d.listed.size());
  for (uint64_t h : d.listed)
    held.emplace(h, 1);
  std::vector<uint64_t> gone;
  for (const auto& [key, hash] : st.hash_of) {
    if (held.contains(hash) || st.written_since_listing.contains(key) ||
        !st.index->contains(key) || !st.backend->node_reachable(st.index->node_of(key)))
      continue;
    gone.push_back(key);
  }
  st.written_since_listing.clear();
  uint64_t lost = 0;
  for (uint64_t key : gone)
    if (st.index->erase(key)) {  // a block being read stays until its get misses
      st.hash_of.erase(key);
      ++lost;
    }
  st.report.blocks_lost += lost;
  if (lost > 0)
    say_once(st.said_lost, std::to_string(lost) + " indexed blocks were gone from the " +
                             st.backend->name() + " backend after a reconnect (dropped from the "
                             "index)");
  check_reconnects(self);  // another reconnect while listing: list again
}

}  // namespace kvtier::storage_impl
