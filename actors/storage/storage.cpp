#include "actors/storage/storage.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <string>

#include "core/check.hpp"
#include "model/storage/storage_index.hpp"
#include "actors/timed_links.hpp"

#include <absl/container/flat_hash_map.h>

namespace kvtier {

namespace {

struct pending_io {
  enum class kind : uint8_t { exists, get, put } what = kind::exists;
  std::vector<uint64_t> keys;
  uint32_t flows = 0;  // still running
  int64_t requested_ns = 0;
  bool shadow = false;  // the model's timing of a request a real backend serves (no reply)
  // byte-carrying backends
  std::vector<uint64_t> hashes;
  std::vector<std::vector<uint8_t>> payloads;  // put
  std::vector<payload_destination> into;       // get: where each key's bytes go
  std::vector<uint8_t> leased;  // get: which keys it leased before reading
  // put: per key written, whether an injected fault fails it, and its node's loss count when the
  // write began (a loss since then means the write went with the node)
  std::vector<uint8_t> fail;
  std::vector<uint64_t> epochs;
  caf::typed_response_promise<exists_reply> exists_promise;
  caf::typed_response_promise<storage_io_reply> io_promise;
};

struct storage_state {
  static inline const char* name = "storage";
  storage_options options;
  std::unique_ptr<storage_index> index;
  timed_links links;
  std::vector<link_model::link_id> read_link, write_link;  // per node
  std::map<link_model::flow_id, uint64_t> flow_to_io;
  std::map<uint64_t, pending_io> ios;
  std::map<uint64_t, std::vector<uint64_t>> leases;  // by lease id: the keys a get leased
  uint64_t next_io = 1;
  storage_report report;
  std::shared_ptr<storage_backend> backend;
  absl::flat_hash_map<uint64_t, uint64_t> hash_of;  // byte backends: storage key -> block hash
  std::vector<caf::typed_response_promise<uint64_t>> rebuilds;
  std::unique_ptr<fault_plan> faults;
  std::vector<uint64_t> node_epoch;  // losses per node
  std::vector<uint8_t> slow;         // per node: inside a slow window
  int64_t fault_wake = link_model::never;  // the fault timer set, if any
};

using self_ptr = storage_actor::stateful_pointer<storage_state>;

int64_t now_of(self_ptr self) {
  return self->state.options.clock.now(self->clock());
}

// Starts the flows of one request: one per node its keys live on (or one latency-only flow).
uint64_t start_io(self_ptr self, pending_io io, uint64_t bytes_each, bool write) {
  auto& st = self->state;
  uint64_t id = st.next_io++;
  int64_t now = st.links.links().time();  // every handler syncs first: start at that instant
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

void start_backend(self_ptr self, uint64_t id);

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

// Mooncake leases what ExistKey matched: the leading run may be read soon, so it stays.
void grant_exists_leases(storage_state& st, const std::vector<uint64_t>& keys, size_t leading) {
  if (st.index->policy().lease_ns <= 0)
    return;
  for (size_t i = 0; i < leading; ++i)
    st.index->lease_for(keys[i]);
  st.report.exists_leases += leading;
}

// A request's service time, from its arrival to `done` (by default: now, when it is answered).
void add_service_time(self_ptr self, const pending_io& io, int64_t done = -1) {
  auto& st = self->state;
  int64_t took = (done >= 0 ? done : now_of(self)) - io.requested_ns;
  if (io.what == pending_io::kind::get)
    st.report.read_service_ns += took;
  else if (io.what == pending_io::kind::put)
    st.report.write_service_ns += took;
}

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
  }
  st.ios.erase(it);
}

void remove_from_backend(self_ptr self, const std::vector<uint64_t>& victims);

// Brings the links to `t` and settles what finished on the way.
void settle_links(self_ptr self, int64_t t) {
  auto& st = self->state;
  std::vector<link_model::op_done> done;
  st.links.advance(t, done);
  for (const auto& d : done) {
    auto it = st.flow_to_io.find(d.flow);
    uint64_t id = it->second;
    st.flow_to_io.erase(it);
    if (--st.ios.at(id).flows == 0)
      finish_io(self, id, d.at);
  }
}

void set_node_gbps(storage_state& st, uint32_t node, double factor, int64_t at) {
  st.links.links().set_gbps(st.read_link[node], st.options.read_gbps * factor, at);
  st.links.links().set_gbps(st.write_link[node], st.options.write_gbps * factor, at);
}

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

// -- byte-carrying backends ------------------------------------------------------------------------

std::vector<block_ref> refs_of(const storage_state& st, const std::vector<uint64_t>& keys) {
  std::vector<block_ref> refs;
  refs.reserve(keys.size());
  for (uint64_t k : keys) {
    auto it = st.hash_of.find(k);
    refs.push_back({k, it == st.hash_of.end() ? 0 : it->second});
  }
  return refs;
}

// Deletes evicted blocks' bytes (the index chose them; nothing waits for the delete).
void remove_from_backend(self_ptr self, const std::vector<uint64_t>& victims) {
  auto& st = self->state;
  if (victims.empty())
    return;
  std::vector<block_ref> refs = refs_of(st, victims);
  for (uint64_t k : victims)
    st.hash_of.erase(k);
  st.backend->remove(std::move(refs), [] {});
}

// When a backend's completion ran: the actor clock's time since its epoch (storage_backend_done).
int64_t backend_clock_now() {
  return caf::actor_clock::clock_type::now().time_since_epoch().count();
}

// Asks the backend for a request's bytes; its answer comes back as a storage_backend_done.
void start_backend(self_ptr self, uint64_t id) {
  auto& st = self->state;
  pending_io& io = st.ios.at(id);
  auto me = caf::actor_cast<storage_actor>(self);
  switch (io.what) {
    case pending_io::kind::exists: {
      // Only what the index holds can be there; the backend says whether it still is.
      size_t leading = st.index->leading_run(io.keys.data(), io.keys.size());
      std::vector<uint64_t> keys(io.keys.begin(), io.keys.begin() + static_cast<long>(leading));
      st.backend->exists(refs_of(st, keys), [me, id](std::vector<bool> present) {
        storage_backend_done d{id, std::vector<uint8_t>(present.begin(), present.end()), {},
                               backend_clock_now()};
        caf::anon_send(me, std::move(d));
      });
      return;
    }
    case pending_io::kind::get: {
      KVTIER_ASSERT(io.into.size() == io.keys.size());
      io.leased.assign(io.keys.size(), 0);
      std::vector<block_ref> refs;
      std::vector<block_span> into;
      for (size_t i = 0; i < io.keys.size(); ++i) {
        if (!st.index->contains(io.keys[i]) || get_fails(st) || !st.index->lease(io.keys[i]))
          continue;
        io.leased[i] = 1;
        uint64_t hash = i < io.hashes.size() ? io.hashes[i] : 0;
        auto it = st.hash_of.find(io.keys[i]);
        refs.push_back({io.keys[i], it != st.hash_of.end() ? it->second : hash});
        into.push_back({reinterpret_cast<uint8_t*>(io.into[i].address), io.into[i].size});
      }
      st.backend->get(std::move(refs), std::move(into), [me, id](std::vector<bool> found) {
        storage_backend_done d{id, std::vector<uint8_t>(found.begin(), found.end()), {},
                               backend_clock_now()};
        caf::anon_send(me, std::move(d));
      });
      return;
    }
    case pending_io::kind::put: {
      KVTIER_ASSERT(io.hashes.size() == io.keys.size() && io.payloads.size() == io.keys.size());
      if (io.keys.empty()) {  // every key was stored or in flight already: nothing to write
        add_service_time(self, io);
        io.io_promise.deliver(storage_io_reply{0, 0, {}});
        st.ios.erase(id);
        return;
      }
      std::vector<block_ref> refs;
      for (size_t i = 0; i < io.keys.size(); ++i)
        refs.push_back({io.keys[i], io.hashes[i]});
      st.backend->put(std::move(refs), std::move(io.payloads), [me, id](std::vector<bool> stored) {
        storage_backend_done d{id, std::vector<uint8_t>(stored.begin(), stored.end()), {},
                               backend_clock_now()};
        caf::anon_send(me, std::move(d));
      });
      return;
    }
  }
}

void on_rebuilt(self_ptr self, std::vector<uint64_t>& hashes) {
  auto& st = self->state;
  uint64_t indexed = 0;
  std::vector<uint64_t> victims;
  for (uint64_t h : hashes) {
    uint64_t key = make_storage_key(st.options.name_space, h);
    if (st.index->contains(key))
      continue;
    if (!st.index->put(key, &victims))
      continue;
    st.hash_of[key] = h;
    ++indexed;
  }
  indexed -= std::min<uint64_t>(indexed, victims.size());
  remove_from_backend(self, victims);  // a smaller pool than the one that wrote them
  st.report.rebuilt += indexed;
  for (auto& p : st.rebuilds)
    p.deliver(indexed);
  st.rebuilds.clear();
}

void on_backend_done(self_ptr self, storage_backend_done& d) {
  auto& st = self->state;
  if (d.io == 0) {
    on_rebuilt(self, d.listed);
    return;
  }
  auto it = st.ios.find(d.io);
  KVTIER_ASSERT(it != st.ios.end());
  pending_io& io = it->second;
  // Real I/O ended when the backend answered, on its own thread; the wait for this actor to take
  // the answer is not the media's time (the shadow model's is counted the same way).
  int64_t done = -1;
  if (d.done_at > 0 && st.backend->asynchronous())
    done = std::min(now_of(self), st.options.clock.at(caf::actor_clock::time_point(
                                    caf::actor_clock::duration_type(d.done_at))));
  add_service_time(self, io, done);
  switch (io.what) {
    case pending_io::kind::exists: {
      uint32_t leading = 0;
      while (leading < d.ok.size() && d.ok[leading])
        ++leading;
      // Indexed but not there (its node is down, or came back empty): the index stops promising
      // it. Bytes a node still holds after a blip are overwritten by the block's next put.
      for (size_t i = leading; i < d.ok.size(); ++i)
        if (!d.ok[i] && st.index->erase(io.keys[i])) {
          st.hash_of.erase(io.keys[i]);
          ++st.report.misses;
        }
      grant_exists_leases(st, io.keys, leading);
      io.exists_promise.deliver(exists_reply{leading});
      break;
    }
    case pending_io::kind::get: {
      storage_io_reply reply;
      reply.found.assign(io.keys.size(), 0);
      std::vector<uint64_t> leased;
      size_t next = 0;  // the backend answered for the leased keys, in order
      for (size_t i = 0; i < io.keys.size(); ++i) {
        if (!io.leased[i])
          continue;
        size_t j = next++;
        if (d.ok[j]) {
          reply.found[i] = 1;
          leased.push_back(io.keys[i]);
          continue;
        }
        // Indexed but gone (its node went down or came back empty): a miss, and no longer held.
        st.index->release_lease(io.keys[i]);
        st.index->erase(io.keys[i]);
        st.hash_of.erase(io.keys[i]);
        ++st.report.misses;
      }
      reply.done = static_cast<uint32_t>(leased.size());
      st.report.keys_found += leased.size();
      reply.lease = st.next_io++;
      st.leases.emplace(reply.lease, std::move(leased));
      io.io_promise.deliver(std::move(reply));
      break;
    }
    case pending_io::kind::put: {
      uint32_t stored = 0;
      std::vector<uint64_t> victims, refused;
      for (size_t i = 0; i < io.keys.size(); ++i) {
        if (!d.ok[i]) {
          ++st.report.puts_dropped;
          st.index->end_put(io.keys[i], false);
          continue;
        }
        if (!write_survived(st, io, i)) {
          st.index->end_put(io.keys[i], false);
          refused.push_back(io.keys[i]);  // written, but it must not stay: roll back
          st.hash_of.emplace(io.keys[i], io.hashes[i]);
          continue;
        }
        if (!st.index->end_put(io.keys[i], true, &victims)) {
          refused.push_back(io.keys[i]);  // the node is full of blocks being read
          st.hash_of.emplace(io.keys[i], io.hashes[i]);
          continue;
        }
        st.hash_of[io.keys[i]] = io.hashes[i];
        ++stored;
      }
      remove_from_backend(self, victims);
      remove_from_backend(self, refused);
      st.report.keys_stored += stored;
      io.io_promise.deliver(storage_io_reply{stored, 0, {}});
      break;
    }
  }
  st.ios.erase(it);
}

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

storage_actor::behavior_type storage_behavior(self_ptr self, storage_options options) {
  auto& st = self->state;
  st.options = options;
  st.backend = options.backend;
  st.report.backend = st.backend ? st.backend->name() : "model";
  KVTIER_ASSERT(!st.backend || st.backend->nodes() == options.nodes);
  st.index = std::make_unique<storage_index>(options.capacity_blocks, options.nodes, options.pool);
  if (options.faults.any())
    st.faults = std::make_unique<fault_plan>(options.faults, options.nodes);
  st.node_epoch.assign(options.nodes, 0);
  st.slow.assign(options.nodes, 0);
  for (uint32_t n = 0; n < options.nodes; ++n) {
    st.read_link.push_back(st.links.links().add_link("storage" + std::to_string(n) + ".read",
                                                     options.read_gbps));
    st.write_link.push_back(st.links.links().add_link("storage" + std::to_string(n) + ".write",
                                                      options.write_gbps));
  }
  return {
    [=](exists_query& q) -> caf::result<exists_reply> {
      sync(self);
      ++self->state.report.exists_queries;
      pending_io io;
      io.what = pending_io::kind::exists;
      io.keys = std::move(q.keys);
      io.exists_promise = self->make_response_promise<exists_reply>();
      return begin_io(self, std::move(io), &pending_io::exists_promise, 0, false);
    },
    [=](caf::get_atom, storage_io& req) -> caf::result<storage_io_reply> {
      sync(self);
      ++self->state.report.gets;
      pending_io io;
      io.what = pending_io::kind::get;
      io.keys = std::move(req.keys);
      io.hashes = std::move(req.hashes);
      io.into = std::move(req.into);
      io.io_promise = self->make_response_promise<storage_io_reply>();
      return begin_io(self, std::move(io), &pending_io::io_promise, req.bytes_each, false);
    },
    [=](caf::put_atom, storage_io& req) -> caf::result<storage_io_reply> {
      sync(self);
      auto& st = self->state;
      ++st.report.puts;
      pending_io io;
      io.what = pending_io::kind::put;
      // Two-phase: only keys neither stored nor being written are written (and pay media time).
      bool bytes = !req.payloads.empty();
      KVTIER_ASSERT(!bytes || (req.payloads.size() == req.keys.size() &&
                               req.hashes.size() == req.keys.size()));
      for (size_t i = 0; i < req.keys.size(); ++i) {
        uint64_t k = req.keys[i];
        switch (st.index->begin_put(k)) {
          case put_start::present: ++st.report.put_present; continue;
          case put_start::in_flight: ++st.report.put_in_flight; continue;
          case put_start::node_down: ++st.report.puts_node_down; continue;
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
      io.io_promise = self->make_response_promise<storage_io_reply>();
      return begin_io(self, std::move(io), &pending_io::io_promise, req.bytes_each, true);
    },
    [=](storage_release& r) {
      auto& st = self->state;
      auto it = st.leases.find(r.lease);
      if (it == st.leases.end())
        return;
      for (uint64_t k : it->second)
        st.index->release_lease(k);
      st.leases.erase(it);
    },
    [=](report_atom) -> storage_report {
      sync(self);
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
        r.pending += !io.shadow;
      if (st.backend) {
        backend_counters c = st.backend->counters();
        r.bytes_read = c.bytes_read;
        r.bytes_written = c.bytes_written;
        r.rollbacks = c.rollbacks;
        r.corrupt = c.corrupt;
        r.node_downs = c.node_downs;
        r.reconnects = c.reconnects;
        r.removed = c.removed;
      }
      return r;
    },
    [=](wake_atom, uint64_t) { sync(self); },
    [=](storage_backend_done& d) {
      sync(self);
      on_backend_done(self, d);
    },
    [=](rebuild_atom) -> caf::result<uint64_t> {
      auto& s = self->state;
      if (!s.backend)
        return uint64_t{0};  // the modelled pool keeps nothing across runs
      auto promise = self->make_response_promise<uint64_t>();
      s.rebuilds.push_back(promise);
      auto me = caf::actor_cast<storage_actor>(self);
      s.backend->list([me](std::vector<uint64_t> hashes) {
        storage_backend_done d;
        d.listed = std::move(hashes);
        caf::anon_send(me, std::move(d));
      });
      return promise;
    },
  };
}

}  // namespace

storage_actor spawn_storage(caf::actor_system& sys, const storage_options& options) {
  return sys.spawn(storage_behavior, options);
}

}  // namespace kvtier
