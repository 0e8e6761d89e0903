#include "actors/storage/storage_state.hpp"

#include <algorithm>

#include "core/check.hpp"

namespace kvtier::storage_impl {

namespace {

// Registers a request and starts it: on the modelled media first (model, memory), or straight at
// an asynchronous backend (its real I/O is the service time).
template <class Promise>
Promise begin_io(self_ptr self, pending_io io, Promise pending_io::*promise, uint64_t bytes_each,
                 bool write) {
  auto& st = self->state;
  io.requested_ns = now_of(self);
  Promise p = io.*promise;
  if (st.backend && st.backend->asynchronous()) {
    if (io.what != pending_io::kind::exists && !io.keys.empty()) {
      // The model serves the same request on its links, beside the real one: what it would have
      // taken, measured against what it took (storage.modelled_*_service_s). A put with nothing
      // left to write (every key stored or in flight) is answered at once, without I/O: the model
      // has no media time to compare it with.
      pending_io shadow;
      shadow.what = io.what;
      shadow.keys = io.keys;
      shadow.requested_ns = io.requested_ns;
      shadow.shadow = true;
      start_io(self, std::move(shadow), bytes_each, write);
    }
    uint64_t id = st.next_io++;
    st.ios.emplace(id, std::move(io));
    start_backend(self, id);
  } else {
    start_io(self, std::move(io), bytes_each, write);
  }
  return p;
}

}  // namespace

caf::result<exists_reply> serve_exists(self_ptr self, exists_query& q) {
  ++self->state.report.exists_queries;
  pending_io io;
  io.what = pending_io::kind::exists;
  io.keys = std::move(q.keys);
  io.exists_promise = self->make_response_promise<exists_reply>();
  return begin_io(self, std::move(io), &pending_io::exists_promise, 0, false);
}

caf::result<storage_io_reply> serve_get(self_ptr self, storage_io& req) {
  ++self->state.report.gets;
  pending_io io;
  io.what = pending_io::kind::get;
  io.keys = std::move(req.keys);
  io.hashes = std::move(req.hashes);
  io.into = std::move(req.into);
  io.io_promise = self->make_response_promise<storage_io_reply>();
  return begin_io(self, std::move(io), &pending_io::io_promise, req.bytes_each, false);
}

caf::result<storage_io_reply> serve_put(self_ptr self, storage_io& req) {
  auto& st = self->state;
  ++st.report.puts;
  pending_io io;
  io.what = pending_io::kind::put;
  // Two-phase: only keys neither stored nor being written are written (and pay media time).
  bool bytes = !req.payloads.empty();
  KVTIER_ASSERT(!bytes || (req.payloads.size() == req.keys.size() &&
                           req.hashes.size() == req.keys.size()));
  // A real pool counts a block from here (storage_capacity_count::accepted): room is made now,
  // and the victims' deletes go before this put's writes.
  std::vector<uint64_t> victims;
  io.keys.reserve(req.keys.size());  // a put of hundreds of keys, grown one at a time, reallocates
  io.fail.reserve(req.keys.size());
  io.epochs.reserve(req.keys.size());
  io.hashes.reserve(std::min(req.hashes.size(), req.keys.size()));
  for (size_t i = 0; i < req.keys.size(); ++i) {
    uint64_t k = req.keys[i];
    switch (st.index->begin_put(k, &victims)) {
      case put_start::present: ++st.report.put_present; continue;
      case put_start::in_flight: ++st.report.put_in_flight; continue;
      case put_start::node_down: ++st.report.puts_node_down; continue;
      case put_start::no_room:
        ++st.report.puts_no_room;
        say_once(st.said_no_room, "a put found its node's capacity all in blocks being written "
                                  "or read; it was not stored");
        continue;
      case put_start::write: break;
    }
    io.keys.push_back(k);
    io.fail.push_back(st.faults && st.faults->fail_put());
    io.epochs.push_back(st.node_epoch[st.index->node_of(k)]);
    if (i < req.hashes.size())
      io.hashes.push_back(req.hashes[i]);
    if (bytes)
      io.payloads.push_back(std::move(req.payloads[i]));
  }
  if (!victims.empty())
    remove_from_backend(self, victims);
  io.io_promise = self->make_response_promise<storage_io_reply>();
  return begin_io(self, std::move(io), &pending_io::io_promise, req.bytes_each, true);
}

// A get's leases end when the transfer engine has moved the bytes it read.
void release_lease(self_ptr self, const storage_release& r) {
  auto& st = self->state;
  auto it = st.leases.find(r.lease);
  if (it == st.leases.end())
    return;
  for (uint64_t k : it->second)
    st.index->release_lease(k);
  st.leases.erase(it);
}

storage_report report_of(self_ptr self) {
  auto& st = self->state;
  storage_report r = st.report;
  r.lease_deferrals = st.index->lease_deferrals();
  r.eviction_batches = st.index->eviction_batches();
  r.writes_in_flight = st.index->writes_in_flight();
  r.leased_keys = st.index->leased_keys();
  r.invariant_checked = st.index->check(r.invariant_messages);
  r.invariant_violations = r.invariant_messages.size();
  r.evictions = st.index->evictions();
  r.stored = st.index->size();
  r.capacity = st.index->capacity();
  for (const auto& l : st.links.links().stats())
    r.nodes.push_back({l.name, l.bytes, l.busy_ns, l.flows});
  r.open_leases = st.leases.size();
  r.pending = 0;
  for (const auto& [id, io] : st.ios)
    r.pending += !io.shadow && io.what != pending_io::kind::remove &&
                 io.what != pending_io::kind::reconcile;
  if (st.backend) {
    backend_counters c = st.backend->counters();
    r.bytes_read = c.bytes_read;
    r.bytes_written = c.bytes_written;
    r.rollbacks = c.rollbacks;
    r.corrupt = c.corrupt;
    r.node_downs = c.node_downs;
    r.reconnects = c.reconnects;
    r.removed = c.removed;
    r.put_error = c.put_error;
    r.auth_failures = c.auth_failures;
    r.tls_failures = c.tls_failures;
  }
  r.deletes_owed = st.owed_deletes.size();
  return r;
}

}  // namespace kvtier::storage_impl
