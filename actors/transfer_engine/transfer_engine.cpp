#include "actors/transfer_engine/transfer_engine.hpp"

#include <algorithm>
#include <map>
#include <optional>

#include "core/check.hpp"
#include "actors/timed_links.hpp"
#include "model/transfer/storage_traffic.hpp"

namespace kvtier {

namespace {

struct running_transfer {
  transfer msg;
  caf::typed_response_promise<transfer_done> promise;
  std::vector<int64_t> layer_done;
  uint64_t lease = 0;
  bool started = false;
  int64_t started_ns = 0;
  int64_t measured_ns = -1;  // measured by the copy backend (-1: by the engine's clock)
};

struct engine_state;

struct engine_state {
  static inline const char* name = "transfer_engine";
  transfer_engine_options options;
  storage_actor storage;
  timed_links links;
  link_model::link_id nic = 0;
  std::unique_ptr<copy_backend> copies;
  std::map<uint64_t, running_transfer> transfers;  // received, not done
  std::map<link_model::flow_id, uint64_t> flow_to_transfer;
  engine_report report;
  // Loads and stores: their room under storage_inflight_bytes, and their parts.
  std::unique_ptr<storage_traffic> storage_flow;
};

using self_ptr = transfer_engine_actor::stateful_pointer<engine_state>;

int64_t now_of(self_ptr self) {
  return self->state.options.clock.now(self->clock());
}

uint64_t bytes_of(const engine_state& st, const transfer& t) {
  return st.options.block_bytes * t.blocks.size();
}

void start_flow(self_ptr self, uint64_t id, std::vector<link_model::link_id> links,
                std::vector<link_model::op> ops) {
  auto& st = self->state;
  // Every handler syncs first; flows start at that instant (on the wall clock, time moves on
  // while a handler runs).
  int64_t now = st.links.links().time();
  auto f = st.links.links().start(now, std::move(links), std::move(ops));
  st.flow_to_transfer[f] = id;
  arm(self, st.options.clock, st.links);
}

void finish(self_ptr self, uint64_t id);
void sync(self_ptr self);
void deliver(self_ptr self, uint64_t id, bool ok, const std::string& error);
void pump_storage(self_ptr self);

// A store's bytes when storage keeps them: blocks [from, to)'s, as the copy backend holds them.
void add_storage_payloads(engine_state& st, const transfer& t, size_t from, size_t to,
                          storage_io& io) {
  if (st.options.storage_payload_bytes == 0)
    return;
  for (size_t i = from; i < to; ++i) {
    io.hashes.push_back(t.blocks[i].hash);
    io.payloads.push_back(
      st.copies->storage_payload(t.blocks[i], st.options.storage_payload_bytes));
  }
}

// A load's bytes, read into the copy backend's destinations: "" if every one is what was stored
// (or storage keeps no bytes). Hands the destinations back either way.
std::string settle_storage_payloads(engine_state& st, const transfer& t, bool found) {
  if (st.options.storage_payload_bytes == 0)
    return {};
  return st.copies->loaded(t, st.options.storage_payload_bytes, found);
}

// Storage transfers stream (docs/design.md, "The timed replay"): a block's bytes cross the storage
// node's media and the host's network link at once, cut through, each link giving the transfer
// its fair share, so that a transfer takes as long as its slower link, not the sum of both. The
// media are the storage actor's (every instance shares them), the network link is the engine's:
// a transfer runs one flow on each, started together, and ends when both have ended.

bool is_storage(transfer_kind kind) {
  return kind == transfer_kind::load || kind == transfer_kind::store;
}

// One part of storage transfer `id` ended: storage's answer or the network flow.
void storage_part_done(self_ptr self, uint64_t id, storage_part part) {
  std::optional<storage_failure> ended = self->state.storage_flow->end_part(id, part);
  if (!ended)
    return;
  if (ended->failed())
    deliver(self, id, false, ended->message());
  else
    finish(self, id);
}

// The first bytes of storage transfer `id` go: its network flow starts beside storage's request.
void start_network_flow(self_ptr self, uint64_t id) {
  auto& st = self->state;
  st.storage_flow->begin_parts(id);
  start_flow(self, id, {st.nic},
             {{st.options.links.nic_latency_ns, bytes_of(st, st.transfers.at(id).msg)}});
}

void start_load(self_ptr self, uint64_t id) {
  auto& st = self->state;
  const transfer& t = st.transfers.at(id).msg;
  storage_io io;
  for (const auto& b : t.blocks)
    io.keys.push_back(b.storage_key);
  io.bytes_each = st.options.block_bytes;
  if (st.options.storage_payload_bytes > 0) {
    for (const auto& b : t.blocks)
      io.hashes.push_back(b.hash);
    io.into = st.copies->load_destinations(t, st.options.storage_payload_bytes);
  }
  start_network_flow(self, id);
  self->request(st.storage, caf::infinite, caf::get_atom_v, std::move(io))
    .then(
      [=](const storage_io_reply& reply) {
        sync(self);
        auto& s = self->state;
        running_transfer& rt = s.transfers.at(id);
        rt.lease = reply.lease;
        if (reply.done < rt.msg.blocks.size()) {
          // Evicted (or lost with its node) since the controller looked: the load fails (no
          // lease) and the controller drops it.
          settle_storage_payloads(s, rt.msg, false);
          self->send(s.storage, storage_release{reply.lease});
          rt.lease = 0;
        } else if (std::string bad = settle_storage_payloads(s, rt.msg, true); !bad.empty()) {
          ++s.report.payload_errors;
          self->send(s.storage, storage_release{reply.lease});
          rt.lease = 0;
          s.storage_flow->fail(id, {storage_fault::payload_mismatch, bad});
        }
        storage_part_done(self, id, storage_part::answer);
      },
      [=](const caf::error& e) {
        // The destinations are not handed back: without storage's answer, its backend may
        // still write them.
        sync(self);
        auto& s = self->state;
        s.transfers.at(id).lease = 0;
        s.storage_flow->fail(id, {storage_fault::get_failed, caf::to_string(e)});
        storage_part_done(self, id, storage_part::answer);
      });
}

void start_store(self_ptr self, uint64_t id) {
  auto& st = self->state;
  const transfer& t = st.transfers.at(id).msg;
  if (st.options.storage_payload_bytes == 0) {
    std::string bad = st.copies->before_store(t);  // the host blocks are read as they leave
    if (!bad.empty()) {
      deliver(self, id, false, bad);
      return;
    }
  }
  if (t.blocks.empty()) {
    deliver(self, id, true, "");
    return;
  }
  st.storage_flow->enqueue(id, transfer_kind::store, t.blocks.size());
  pump_storage(self);
}

// Hands blocks [from, from + count) of store `id` to storage; the answer frees their bytes. The
// storage part of the store ends when every put is answered.
void put_blocks(self_ptr self, uint64_t id, size_t from, size_t count) {
  auto& st = self->state;
  const transfer& t = st.transfers.at(id).msg;
  storage_io io;
  for (size_t i = from; i < from + count; ++i)
    io.keys.push_back(t.blocks[i].storage_key);
  io.bytes_each = st.options.block_bytes;
  add_storage_payloads(st, t, from, from + count, io);
  auto answered = [=](storage_failure f) {
    sync(self);
    // Blocks a backend could not store are its count, not a failure.
    if (self->state.storage_flow->put_answered(id, count, std::move(f)))
      storage_part_done(self, id, storage_part::answer);
    pump_storage(self);
  };
  self->request(st.storage, caf::infinite, caf::put_atom_v, std::move(io))
    .then([=](const storage_io_reply&) { answered({}); },
          [=](const caf::error& e) {
            answered({storage_fault::put_failed, caf::to_string(e)});
          });
}

// Backpressure (docs/design.md, "Bytes in flight to storage"; storage_traffic.hpp): what fits
// under storage_inflight_bytes goes, in order; a transfer's network flow starts with its first
// bytes to or from storage (cut through, above).
void pump_storage(self_ptr self) {
  auto& st = self->state;
  for (const storage_grant& go : st.storage_flow->pump(now_of(self))) {
    if (go.kind == transfer_kind::load) {
      start_load(self, go.id);
      continue;
    }
    if (go.first())
      start_network_flow(self, go.id);
    put_blocks(self, go.id, go.from, go.count);
  }
}

void start(self_ptr self, uint64_t id) {
  auto& st = self->state;
  running_transfer& r = st.transfers.at(id);
  r.started = true;
  r.started_ns = now_of(self);
  const transfer& t = r.msg;
  switch (t.kind) {
    case transfer_kind::fill:
      st.copies->fill(t);  // before any later D2H reads them
      finish(self, id);
      return;
    case transfer_kind::swap_in:
    case transfer_kind::backup:
    case transfer_kind::write_back:
      st.copies->start(t);
      return;
    case transfer_kind::store:
      start_store(self, id);
      return;
    case transfer_kind::load:
      st.storage_flow->enqueue(id, transfer_kind::load, t.blocks.size());
      pump_storage(self);
      return;
  }
}

bool ready_to_start(const engine_state& st, const transfer& t) {
  return std::none_of(t.after.begin(), t.after.end(),
                      [&](uint64_t dep) { return st.transfers.count(dep) > 0; });
}

void start_unblocked(self_ptr self) {
  auto& st = self->state;
  std::vector<uint64_t> now_ready;
  for (auto& [id, r] : st.transfers)
    if (!r.started && ready_to_start(st, r.msg))
      now_ready.push_back(id);
  // A transfer that ends as it starts (a fill) frees others at once, and they start from its
  // end: skip whatever that already started, or finished.
  for (uint64_t id : now_ready) {
    auto it = st.transfers.find(id);
    if (it != st.transfers.end() && !it->second.started)
      start(self, id);
  }
}

void deliver(self_ptr self, uint64_t id, bool ok, const std::string& error) {
  auto& st = self->state;
  auto it = st.transfers.find(id);
  running_transfer& r = it->second;
  transfer_kind kind = r.msg.kind;
  bool freed_room = st.storage_flow->forget(id);
  ++at(st.report.transfers, kind);
  if (ok)
    at(st.report.bytes, kind) += bytes_of(st, r.msg);
  else
    ++st.report.failed;
  int64_t took = r.measured_ns >= 0 ? r.measured_ns : now_of(self) - r.started_ns;
  st.report.log.push_back(
    {id, r.msg.kind, static_cast<uint32_t>(r.msg.blocks.size()), took, now_of(self),
     r.started_ns});
  transfer_done d{id, ok, now_of(self), std::move(r.layer_done), error};
  r.promise.deliver(std::move(d));
  st.transfers.erase(it);
  start_unblocked(self);
  if (freed_room)
    pump_storage(self);
}

void finish(self_ptr self, uint64_t id) {
  auto& st = self->state;
  running_transfer& r = st.transfers.at(id);
  transfer_kind kind = r.msg.kind;
  if (kind == transfer_kind::load) {
    if (r.lease == 0) {
      deliver(self, id, false, "storage no longer holds every block");
      return;
    }
    self->send(st.storage, storage_release{r.lease});
    if (st.options.storage_payload_bytes == 0) {  // bytes kept by the copy backend, if any
      std::string bad = st.copies->after_load(r.msg);
      if (!bad.empty()) {
        deliver(self, id, false, bad);
        return;
      }
    }
  }
  deliver(self, id, true, "");
}

// Brings the links to the present and settles what finished on the way. Every handler calls it
// first, so a message that arrives at the instant a flow completes sees the completion.
void sync(self_ptr self) {
  auto& st = self->state;
  std::vector<link_model::op_done> done = st.links.advance(now_of(self));
  for (const auto& d : done) {
    uint64_t id = st.flow_to_transfer.at(d.flow);
    running_transfer& r = st.transfers.at(id);
    if (r.msg.kind == transfer_kind::swap_in)
      r.layer_done.push_back(d.at);
    if (d.last) {
      st.flow_to_transfer.erase(d.flow);
      if (is_storage(r.msg.kind))
        storage_part_done(self, id, storage_part::flow);
      else
        finish(self, id);
    }
  }
  st.links.recycle(std::move(done));
  arm(self, st.options.clock, st.links);
}

// The copy backend's reports, as the engine's flows report them.
class engine_events : public copy_events {
 public:
  explicit engine_events(self_ptr self) : self_(self) {}
  void layer_done(uint64_t transfer) override {
    self_->state.transfers.at(transfer).layer_done.push_back(now_of(self_));
  }
  void copy_done(uint64_t transfer, int64_t measured_ns, const std::string& error) override {
    self_->state.transfers.at(transfer).measured_ns = measured_ns;
    if (!error.empty())
      deliver(self_, transfer, false, error);
    else
      finish(self_, transfer);
  }

 private:
  self_ptr self_;
};

// The backend the deployment chose; the modelled one adds its links before the engine's nic.
std::unique_ptr<copy_backend> make_copies(self_ptr self) {
  auto& st = self->state;
  return st.options.copies(
    st.options, st.links.links(),
    [self](uint64_t id, std::vector<link_model::link_id> links, std::vector<link_model::op> ops) {
      start_flow(self, id, std::move(links), std::move(ops));
    });
}

transfer_engine_actor::behavior_type engine_behavior(self_ptr self,
                                                     transfer_engine_options options,
                                                     storage_actor storage) {
  auto& st = self->state;
  st.options = options;
  st.storage = std::move(storage);
  KVTIER_ASSERT(options.layers > 0 && options.block_bytes % options.layers == 0);
  st.copies = make_copies(self);
  st.storage_flow = std::make_unique<storage_traffic>(options.storage_payload_bytes,
                                                      options.storage_inflight_bytes);
  st.nic = st.links.links().add_link("nic", options.links.nic_gbps);
  return {
    [=](transfer& t) -> caf::result<transfer_done> {
      sync(self);
      auto& s = self->state;
      uint64_t id = t.id;
      running_transfer r;
      r.promise = self->make_response_promise<transfer_done>();
      auto promise = r.promise;
      bool go = ready_to_start(s, t);
      if (is_pcie(t.kind))
        s.copies->expect(t);
      r.msg = std::move(t);
      s.transfers.emplace(id, std::move(r));
      if (go)
        start(self, id);
      return promise;
    },
    [=](report_atom) -> engine_report {
      auto& s = self->state;
      engine_report r = s.report;
      const storage_traffic_counts& c = s.storage_flow->counts();
      r.store_waits = c.waits;
      r.store_wait_ns = c.wait_ns;
      r.storage_inflight_peak_bytes = c.inflight_peak_bytes;
      r.backend = s.copies->name();
      r.device = s.copies->device();
      for (const auto& ls : s.links.links().stats())
        r.links.push_back({ls.name, ls.bytes, ls.busy_ns, ls.flows});
      return r;
    },
    [=](wake_atom, uint64_t) { sync(self); },
    [=](gpu_done_atom, uint64_t op, int32_t layer) {
      sync(self);
      engine_events events(self);
      self->state.copies->on_device_event(op, layer, events);
    },
  };
}

}  // namespace

transfer_engine_actor spawn_transfer_engine(caf::actor_system& sys,
                                            const transfer_engine_options& options,
                                            storage_actor storage) {
  return sys.spawn(engine_behavior, options, std::move(storage));
}

}  // namespace kvtier
