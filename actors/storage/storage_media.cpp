#include <algorithm>

#include "actors/storage/storage_state.hpp"
#include "core/check.hpp"

namespace kvtier::storage_impl {

int64_t now_of(self_ptr self) {
  return self->state.options.clock.now(self->clock());
}

// Starts the flows of one request: one per node its keys live on (or one latency-only flow).
uint64_t start_io(self_ptr self, pending_io io, uint64_t bytes_each, bool write) {
  auto& st = self->state;
  uint64_t id = st.next_io++;
  int64_t now = st.links.links().time();  // every handler syncs first: start at that instant
  // The model's service runs from the instant its flows start on the links: the handler's own
  // time since its sync is no part of it (on a busy host, times --speed, that could exceed the
  // flows' whole length, and the difference would count negative).
  if (io.shadow)
    io.requested_ns = now;
  std::vector<uint64_t> per_node(st.index->nodes(), 0);
  for (uint64_t k : io.keys)
    ++per_node[st.index->node_of(k)];
  int64_t latency = write ? st.options.op_latency_ns : st.options.read_latency_ns();
  if (bytes_each == 0 || io.keys.empty()) {
    auto f = st.links.links().start(now, {}, {{latency, 0}});
    st.flow_to_io[f] = id;
    io.flows = 1;
  } else {
    for (uint32_t n = 0; n < per_node.size(); ++n) {
      if (per_node[n] == 0)
        continue;
      auto link = write ? st.write_link[n] : st.read_link[n];
      double stream = write ? st.options.stream_write_gbps : st.options.stream_read_gbps;
      auto f = st.links.links().start(now, {link},
                                      {{latency, per_node[n] * bytes_each}},
                                      stream * static_cast<double>(per_node[n]));
      st.flow_to_io[f] = id;
      ++io.flows;
    }
  }
  st.ios.emplace(id, std::move(io));
  arm(self, st.options.clock, st.links);
  return id;
}

// Mooncake leases what ExistKey matched: the leading run may be read soon, so it stays.
void grant_exists_leases(storage_state& st, const std::vector<uint64_t>& keys, size_t leading) {
  if (st.index->policy().lease_ns <= 0)
    return;
  for (size_t i = 0; i < leading; ++i)
    st.index->lease_for(keys[i]);
  st.report.exists_leases += leading;
}

// A request's service time, from its arrival to `done` (by default: now, when it is answered).
void add_service_time(self_ptr self, const pending_io& io, int64_t done) {
  auto& st = self->state;
  int64_t took = (done >= 0 ? done : now_of(self)) - io.requested_ns;
  if (io.what == pending_io::kind::get)
    st.report.read_service_ns += took;
  else if (io.what == pending_io::kind::put)
    st.report.write_service_ns += took;
}

namespace {

// `at`: the instant the request's last flow ended on the links.
void finish_io(self_ptr self, uint64_t id, int64_t at) {
  auto& st = self->state;
  auto it = st.ios.find(id);
  pending_io& io = it->second;
  if (io.shadow) {
    // The model's time is when its flows ended, not when this actor next looked: on a busy host
    // that can be a timer's lateness later, which is no part of the modelled media's time.
    int64_t took = at - io.requested_ns;
    (io.what == pending_io::kind::get ? st.report.modelled_read_service_ns
                                      : st.report.modelled_write_service_ns) += took;
    st.ios.erase(it);
    return;
  }
  if (st.backend) {
    start_backend(self, id);  // the media time is over: now the bytes move
    return;
  }
  add_service_time(self, io);
  switch (io.what) {
    case pending_io::kind::exists: {
      auto leading = static_cast<uint32_t>(st.index->leading_run(io.keys.data(), io.keys.size()));
      grant_exists_leases(st, io.keys, leading);
      io.exists_promise.deliver(exists_reply{leading});
      break;
    }
    case pending_io::kind::get: {
      std::vector<uint64_t> leased;
      for (uint64_t k : io.keys)
        if (st.index->contains(k) && !get_fails(st) && st.index->lease(k))
          leased.push_back(k);
      st.report.keys_found += leased.size();
      uint64_t lease = st.next_io++;
      st.leases.emplace(lease, std::move(leased));
      io.io_promise.deliver(
        storage_io_reply{static_cast<uint32_t>(st.leases[lease].size()), lease, {}});
      break;
    }
    case pending_io::kind::put: {
      uint32_t stored = 0;
      for (size_t i = 0; i < io.keys.size(); ++i)
        stored += st.index->end_put(io.keys[i], write_survived(st, io, i));
      st.report.keys_stored += stored;
      io.io_promise.deliver(storage_io_reply{stored, 0, {}});
      break;
    }
    case pending_io::kind::remove:
    case pending_io::kind::reconcile:
      KVTIER_ASSERT(false);  // backend work only (storage_backend_io.cpp): it takes no media time
      break;
  }
  st.ios.erase(it);
}

// Brings the links to `t` and settles what finished on the way.
void settle_links(self_ptr self, int64_t t) {
  auto& st = self->state;
  std::vector<link_model::op_done> done = st.links.advance(t);
  for (const auto& d : done) {
    auto it = st.flow_to_io.find(d.flow);
    uint64_t id = it->second;
    st.flow_to_io.erase(it);
    if (--st.ios.at(id).flows == 0)
      finish_io(self, id, d.at);
  }
  st.links.recycle(std::move(done));
}

}  // namespace

// Brings the pool to the present: faults and completions in time order up to now. Every handler
// calls it first.
void sync(self_ptr self) {
  auto& st = self->state;
  int64_t now = now_of(self);
  while (st.faults && st.faults->next_at() <= now) {
    int64_t t = std::max(st.faults->next_at(), st.links.links().time());
    st.index->set_now(t);
    settle_links(self, t);
    apply_fault(self, st.faults->pop());
  }
  st.index->set_now(now);
  settle_links(self, now);
  arm(self, st.options.clock, st.links);
  arm_fault_wake(self);
}

}  // namespace kvtier::storage_impl
