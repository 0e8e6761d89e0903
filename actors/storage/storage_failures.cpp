#include <algorithm>
#include <iostream>

#include "actors/storage/storage_state.hpp"

namespace kvtier::storage_impl {

namespace {

// Owed deletes and incomplete listings are tried again at most this often (the backend clock's
// ticks are nanoseconds: caf::actor_clock is steady_clock).
constexpr int64_t retry_interval_ns = 1'000'000'000;
// A connection given up on may still deliver what it carried: a server that was paused, or a
// network path that held bytes, applies commands after kvtier counted them failed (a put
// dropped, a delete owed), typically as the path heals, when the reconnect's own reconcile runs.
// A second reconcile this long after the one a reconnect started finds what landed late.
constexpr int64_t followup_after_ns = 10'000'000'000;

bool reachable(const storage_state& st, uint64_t key) {
  return st.backend->node_reachable(st.index->node_of(key));
}

// Deletes that could not run, tried again where their node can be reached now. A key stored again
// meanwhile is not deleted: its new bytes overwrote what the delete was for.
void retry_owed(self_ptr self) {
  auto& st = self->state;
  std::vector<block_ref> again;
  for (auto it = st.owed_deletes.begin(); it != st.owed_deletes.end();) {
    auto here = it++;
    auto [key, hash] = *here;
    if (st.index->contains(key) || st.index->writing(key)) {
      st.owed_deletes.erase(here);
      continue;
    }
    if (!reachable(st, key))
      continue;
    again.push_back({key, hash});
    st.owed_deletes.erase(here);
  }
  st.report.deletes_retried += again.size();
  delete_blocks(self, std::move(again));
}

void start_listing(self_ptr self) {
  auto& st = self->state;
  st.reconciling = true;
  st.reconcile_again = false;
  st.written_since_listing.clear();
  ++st.report.reconciles;
  uint64_t id = st.next_io++;
  pending_io io;
  io.what = pending_io::kind::reconcile;
  st.ios.emplace(id, std::move(io));
  auto me = caf::actor_cast<storage_actor>(self);
  st.backend->list([me, id](block_listing listing) {
    storage_backend_done d{id, std::move(listing.listed), std::move(listing.blocks),
                           std::move(listing.partial), 0};
    caf::anon_send(me, std::move(d));
  });
}

}  // namespace

// A failure kind is said on stderr when it first happens, once; the run's end sums them up
// (docs/robustness.md, "Failures said out loud").
void say_once(bool& said, const std::string& what) {
  if (said)
    return;
  said = true;
  std::cerr << "kvtier: storage: " << what << " (counted; summed up at the end)\n";
}

// A delete that could not run (its node out of reach) is owed: tried again once the node can be
// reached, and found by the next reconcile if it is still there then (docs/robustness.md,
// "Nothing left behind").
void on_removed(self_ptr self, const pending_io& io, const storage_backend_done& d) {
  auto& st = self->state;
  st.deletes_in_flight -= std::min<uint64_t>(st.deletes_in_flight, io.keys.size());
  uint64_t failed = 0;
  for (size_t i = 0; i < io.keys.size(); ++i) {
    if (i < d.ok.size() && d.ok[i])
      continue;
    st.owed_deletes[io.keys[i]] = io.hashes[i];
    ++failed;
  }
  st.report.deletes_failed += failed;
  if (failed > 0)
    say_once(st.said_owed, "a delete could not reach its node; it is retried once the node "
                           "answers, and the next reconcile removes what is left");
}

// After a node came back the index may promise blocks the backend lost (a Redis restarted without
// persistence comes back empty), and the backend may hold blocks the index let go while it could
// not delete them: retry the owed deletes, and list what the backend holds to compare both ways.
void check_reconnects(self_ptr self) {
  auto& st = self->state;
  if (!st.backend || !st.backend->asynchronous())
    return;
  backend_counters c = st.backend->counters();
  if (c.puts_failed > 0 && !st.said_dropped)
    say_once(st.said_dropped, "a put could not store its block: " +
                                (c.put_error.empty() ? std::string("unknown") : c.put_error));
  int64_t now = backend_clock_now();
  bool due = now >= st.next_retry_at;
  if (c.reconnects > st.reconnects_retried || (due && !st.owed_deletes.empty())) {
    st.reconnects_retried = c.reconnects;
    st.next_retry_at = now + retry_interval_ns;
    retry_owed(self);
  }
  if (st.reconciling)
    return;  // on_reconciled looks again when its listing is in: a reconnect meanwhile lists again
  bool reconnected = c.reconnects > st.reconnects_seen;
  st.reconnects_seen = c.reconnects;
  bool followup = st.followup_at > 0 && now >= st.followup_at;
  if (reconnected || (due && st.reconcile_again) || followup) {
    st.next_retry_at = now + retry_interval_ns;
    if (reconnected)
      st.followup_at = now + followup_after_ns;
    else if (followup)
      st.followup_at = 0;
    start_listing(self);
  }
}

// The listing is in; only nodes it listed completely are compared.
// - An indexed block the backend does not hold, not written since the listing began, is lost: it
//   leaves the index, so no lookup is answered from it.
// - A block (or a part of one) the backend holds that the index neither stores nor is writing,
//   and that was not written since the listing began, is an orphan (a delete that failed, a
//   rollback that could not run): it is deleted. Only this pool's namespace is listed
//   ("kvtier:<model>:<dtype>:"), so nothing else in the backend is touched.
void on_reconciled(self_ptr self, pending_io&, const storage_backend_done& d) {
  auto& st = self->state;
  st.reconciling = false;
  auto listed = [&](uint64_t key) {
    uint32_t n = st.index->node_of(key);
    return n < d.ok.size() && d.ok[n];
  };
  bool whole = std::all_of(d.ok.begin(), d.ok.end(), [](uint8_t l) { return l != 0; });
  absl::flat_hash_map<uint64_t, uint8_t> held;
  held.reserve(d.listed.size());
  for (uint64_t h : d.listed)
    held.emplace(h, 1);
  std::vector<uint64_t> gone;
  for (const auto& [key, hash] : st.hash_of) {
    if (held.contains(hash) || st.written_since_listing.contains(key) ||
        !st.index->contains(key) || !listed(key) || !reachable(st, key))
      continue;
    gone.push_back(key);
  }
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
  std::vector<block_ref> orphans;
  for (const std::vector<uint64_t>* hashes : {&d.listed, &d.partial})
    for (uint64_t h : *hashes) {
      uint64_t key = make_storage_key(st.options.name_space, h);
      if (!listed(key) || st.index->contains(key) || st.index->writing(key) ||
          st.written_since_listing.contains(key))
        continue;
      st.owed_deletes.erase(key);  // deleted now
      orphans.push_back({key, h});
    }
  st.written_since_listing.clear();
  st.report.orphans_removed += orphans.size();
  if (!orphans.empty())
    say_once(st.said_orphans, std::to_string(orphans.size()) + " blocks the " +
                                st.backend->name() + " backend held were not in the index (deletes "
                                "that failed while a node was out of reach); they were deleted");
  delete_blocks(self, std::move(orphans));
  // A node it could not list is compared once it can be.
  st.reconcile_again = !whole;
}

}  // namespace kvtier::storage_impl
