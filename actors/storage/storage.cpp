#include "actors/storage/storage.hpp"

#include <map>
#include <string>

#include "core/check.hpp"
#include "actors/storage/storage_index.hpp"
#include "actors/timed_links.hpp"

namespace kvtier {

namespace {

struct pending_io {
  enum class kind : uint8_t { exists, get, put } what = kind::exists;
  std::vector<uint64_t> keys;
  uint32_t flows = 0;  // still running
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
  if (bytes_each == 0 || io.keys.empty()) {
    auto f = st.links.links().start(now, {}, {{st.options.op_latency_ns, 0}});
    st.flow_to_io[f] = id;
    io.flows = 1;
  } else {
    for (uint32_t n = 0; n < per_node.size(); ++n) {
      if (per_node[n] == 0)
        continue;
      auto link = write ? st.write_link[n] : st.read_link[n];
      auto f = st.links.links().start(now, {link},
                                      {{st.options.op_latency_ns, per_node[n] * bytes_each}});
      st.flow_to_io[f] = id;
      ++io.flows;
    }
  }
  st.ios.emplace(id, std::move(io));
  arm(self, st.options.clock, st.links);
  return id;
}

void finish_io(self_ptr self, uint64_t id) {
  auto& st = self->state;
  auto it = st.ios.find(id);
  pending_io& io = it->second;
  switch (io.what) {
    case pending_io::kind::exists:
      io.exists_promise.deliver(
        exists_reply{static_cast<uint32_t>(st.index->leading_run(io.keys.data(), io.keys.size()))});
      break;
    case pending_io::kind::get: {
      std::vector<uint64_t> leased;
      for (uint64_t k : io.keys)
        if (st.index->lease(k))
          leased.push_back(k);
      st.report.keys_found += leased.size();
      uint64_t lease = st.next_io++;
      st.leases.emplace(lease, std::move(leased));
      io.io_promise.deliver(storage_io_reply{static_cast<uint32_t>(st.leases[lease].size()), lease});
      break;
    }
    case pending_io::kind::put: {
      uint32_t stored = 0;
      for (uint64_t k : io.keys)
        stored += st.index->put(k);
      st.report.keys_stored += stored;
      io.io_promise.deliver(storage_io_reply{stored});
      break;
    }
  }
  st.ios.erase(it);
}

// Brings the links to the present and settles what finished on the way; every handler calls it
// first.
void sync(self_ptr self) {
  auto& st = self->state;
  std::vector<link_model::op_done> done;
  st.links.advance(now_of(self), done);
  for (const auto& d : done) {
    auto it = st.flow_to_io.find(d.flow);
    uint64_t id = it->second;
    st.flow_to_io.erase(it);
    if (--st.ios.at(id).flows == 0)
      finish_io(self, id);
  }
  arm(self, st.options.clock, st.links);
}

storage_actor::behavior_type storage_behavior(self_ptr self, storage_options options) {
  auto& st = self->state;
  st.options = options;
  st.index = std::make_unique<storage_index>(options.capacity_blocks, options.nodes);
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
      auto promise = io.exists_promise;
      start_io(self, std::move(io), 0, false);
      return promise;
    },
    [=](caf::get_atom, storage_io& req) -> caf::result<storage_io_reply> {
      sync(self);
      ++self->state.report.gets;
      pending_io io;
      io.what = pending_io::kind::get;
      io.keys = std::move(req.keys);
      io.io_promise = self->make_response_promise<storage_io_reply>();
      auto promise = io.io_promise;
      start_io(self, std::move(io), req.bytes_each, false);
      return promise;
    },
    [=](caf::put_atom, storage_io& req) -> caf::result<storage_io_reply> {
      sync(self);
      ++self->state.report.puts;
      pending_io io;
      io.what = pending_io::kind::put;
      io.keys = std::move(req.keys);
      io.io_promise = self->make_response_promise<storage_io_reply>();
      auto promise = io.io_promise;
      start_io(self, std::move(io), req.bytes_each, true);
      return promise;
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
      auto& st = self->state;
      storage_report r = st.report;
      r.evictions = st.index->evictions();
      r.stored = st.index->size();
      r.capacity = st.index->capacity();
      for (const auto& l : st.links.links().stats())
        r.nodes.push_back({l.name, l.bytes, l.busy_ns, l.flows});
      return r;
    },
    [=](wake_atom, uint64_t) { sync(self); },
  };
}

}  // namespace

storage_actor spawn_storage(caf::actor_system& sys, const storage_options& options) {
  return sys.spawn(storage_behavior, options);
}

}  // namespace kvtier
