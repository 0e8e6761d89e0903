#include "actors/transfer_engine/transfer_engine.hpp"

#include <algorithm>
#include <map>

#include "actors/check.hpp"
#include "actors/storage/payload_pattern.hpp"
#include "actors/timed_links.hpp"

namespace kvtier {

namespace {

struct running_transfer {
  transfer msg;
  caf::typed_response_promise<transfer_done> promise;
  std::vector<int64_t> layer_done;
  uint64_t lease = 0;
  bool started = false;
  int64_t started_ns = 0;
  int64_t measured_ns = -1;  // real backend: CUDA event time
};

struct pending_compute {
  compute_request req;
  caf::typed_response_promise<compute_done> promise;
};

// Real backend: each swap-in's GPU op lives until its completion was seen and the step compute
// that waits for it was submitted (that compute waits on its events).
struct h2d_op {
  uint64_t op = 0;
  bool completed = false;
  bool referenced = false;
};

struct engine_state {
  static inline const char* name = "transfer_engine";
  transfer_engine_options options;
  storage_actor storage;
  timed_links links;
  link_model::link_id h2d = 0, d2h = 0, pcie = 0, nic = 0;
  std::map<uint64_t, running_transfer> transfers;  // received, not done
  std::map<link_model::flow_id, uint64_t> flow_to_transfer;
  engine_report report;
  // real backend
  std::map<uint64_t, uint64_t> op_to_transfer;
  std::map<uint64_t, h2d_op> swap_in_ops;                 // by transfer id
  std::map<uint64_t, pending_compute> computes;           // by GPU op
  std::map<uint64_t, pending_compute> waiting_computes;   // by swap-in transfer not started yet
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

// A store's bytes for a byte-carrying storage backend: the host blocks on the real backend, else
// each block's hash pattern.
void add_storage_payloads(engine_state& st, const transfer& t, storage_io& io) {
  if (st.options.storage_payload_bytes == 0)
    return;
  for (const auto& b : t.blocks) {
    io.hashes.push_back(b.hash);
    io.payloads.push_back(st.options.gpu
                            ? st.options.gpu->host_payload(b.host_block)
                            : pattern_payload(b.hash, st.options.storage_payload_bytes));
  }
}

// A load's bytes: into the host blocks and checked there (real backend), else checked against
// each block's pattern. Empty if every block is what was stored.
std::string check_storage_payloads(self_ptr self, const transfer& t, const storage_io_reply& r) {
  auto& st = self->state;
  if (st.options.storage_payload_bytes == 0)
    return {};
  if (r.payloads.size() != t.blocks.size())
    return "verify: storage answered " + std::to_string(r.payloads.size()) + " payloads for " +
           std::to_string(t.blocks.size()) + " blocks";
  for (size_t i = 0; i < t.blocks.size(); ++i) {
    const block_move& b = t.blocks[i];
    std::string bad = st.options.gpu
                        ? st.options.gpu->restore_payload(b, r.payloads[i])
                        : check_pattern_payload(b.hash, st.options.storage_payload_bytes,
                                                r.payloads[i]);
    if (!bad.empty())
      return bad;
  }
  return {};
}

void submit_compute(self_ptr self, pending_compute p);

void release_if_done(self_ptr self, uint64_t transfer_id) {
  auto& st = self->state;
  auto it = st.swap_in_ops.find(transfer_id);
  if (it != st.swap_in_ops.end() && it->second.completed && it->second.referenced) {
    st.options.gpu->release(it->second.op);
    st.swap_in_ops.erase(it);
  }
}

void start(self_ptr self, uint64_t id) {
  auto& st = self->state;
  running_transfer& r = st.transfers.at(id);
  r.started = true;
  r.started_ns = now_of(self);
  const transfer& t = r.msg;
  auto kind = static_cast<move_kind>(t.kind);
  uint64_t n = t.blocks.size();
  const link_options& lo = st.options.links;
  if (kind == move_kind::fill) {
    if (st.options.gpu)
      st.options.gpu->fill(t);  // on the compute stream, before any later D2H reads them
    finish(self, id);
    return;
  }
  if (st.options.gpu && (kind == move_kind::swap_in || kind == move_kind::d2h)) {
    uint64_t op = st.options.gpu->submit(t);
    st.op_to_transfer[op] = id;
    if (kind == move_kind::swap_in) {
      st.swap_in_ops[id] = h2d_op{op, false, false};
      auto w = st.waiting_computes.find(id);
      if (w != st.waiting_computes.end()) {
        pending_compute p = std::move(w->second);
        st.waiting_computes.erase(w);
        submit_compute(self, std::move(p));
      }
    }
    return;
  }
  switch (kind) {
    case move_kind::swap_in: {
      uint64_t layer_bytes = st.options.block_bytes / st.options.layers * n;
      std::vector<link_model::op> ops(st.options.layers, {lo.h2d_layer_latency_ns, layer_bytes});
      start_flow(self, id, {st.h2d, st.pcie}, std::move(ops));
      return;
    }
    case move_kind::d2h:
      start_flow(self, id, {st.d2h, st.pcie}, {{lo.d2h_latency_ns, bytes_of(st, t)}});
      return;
    case move_kind::store:
      start_flow(self, id, {st.nic}, {{lo.nic_latency_ns, bytes_of(st, t)}});
      return;
    case move_kind::fill:
      return;  // handled above
    case move_kind::load: {
      storage_io io;
      for (const auto& b : t.blocks)
        io.keys.push_back(b.storage_key);
      io.bytes_each = st.options.block_bytes;
      if (st.options.storage_payload_bytes > 0)
        for (const auto& b : t.blocks)
          io.hashes.push_back(b.hash);
      self->request(st.storage, caf::infinite, caf::get_atom_v, std::move(io))
        .then(
          [=](const storage_io_reply& reply) {
            sync(self);
            auto& s = self->state;
            running_transfer& rt = s.transfers.at(id);
            rt.lease = reply.lease;
            if (reply.done < rt.msg.blocks.size()) {
              // Evicted (or lost with its node) since the controller looked: the load fails and
              // the controller drops it.
              self->send(s.storage, storage_release{reply.lease});
              rt.lease = 0;
              finish(self, id);
              return;
            }
            if (std::string bad = check_storage_payloads(self, rt.msg, reply); !bad.empty()) {
              ++s.report.payload_errors;
              self->send(s.storage, storage_release{reply.lease});
              rt.lease = 0;
              deliver(self, id, false, bad);
              return;
            }
            start_flow(self, id, {s.nic}, {{lo.nic_latency_ns, bytes_of(s, rt.msg)}});
          },
          [=](const caf::error& e) {
            sync(self);
            self->state.transfers.at(id).lease = 0;
            deliver(self, id, false, "storage get failed: " + caf::to_string(e));
          });
      return;
    }
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
  for (uint64_t id : now_ready)
    start(self, id);
}

void deliver(self_ptr self, uint64_t id, bool ok, const std::string& error) {
  auto& st = self->state;
  auto it = st.transfers.find(id);
  running_transfer& r = it->second;
  auto kind = r.msg.kind;
  ++st.report.transfers[kind];
  if (ok)
    st.report.bytes[kind] += bytes_of(st, r.msg);
  else
    ++st.report.failed;
  int64_t took = r.measured_ns >= 0 ? r.measured_ns : now_of(self) - r.started_ns;
  st.report.log.push_back({id, r.msg.kind, static_cast<uint32_t>(r.msg.blocks.size()), took});
  transfer_done d{id, ok, now_of(self), std::move(r.layer_done), error};
  r.promise.deliver(std::move(d));
  st.transfers.erase(it);
  start_unblocked(self);
}

void finish(self_ptr self, uint64_t id) {
  auto& st = self->state;
  running_transfer& r = st.transfers.at(id);
  auto kind = static_cast<move_kind>(r.msg.kind);
  if (kind == move_kind::load) {
    if (r.lease == 0) {
      deliver(self, id, false, "storage no longer holds every block");
      return;
    }
    self->send(st.storage, storage_release{r.lease});
    if (st.options.gpu && st.options.storage_payload_bytes == 0) {
      std::string bad = st.options.gpu->restore(r.msg);
      if (!bad.empty()) {
        deliver(self, id, false, bad);
        return;
      }
    }
  }
  if (kind == move_kind::store) {
    if (st.options.gpu && st.options.storage_payload_bytes == 0) {
      std::string bad = st.options.gpu->keep(r.msg);
      if (!bad.empty()) {
        deliver(self, id, false, bad);
        return;
      }
    }
    storage_io io;
    for (const auto& b : r.msg.blocks)
      io.keys.push_back(b.storage_key);
    io.bytes_each = st.options.block_bytes;
    add_storage_payloads(st, r.msg, io);
    self->request(st.storage, caf::infinite, caf::put_atom_v, std::move(io))
      .then(
        [=](const storage_io_reply&) {
          sync(self);
          deliver(self, id, true, "");  // blocks a backend could not store are its count
        },
        [=](const caf::error& e) {
          sync(self);
          deliver(self, id, false, "storage put failed: " + caf::to_string(e));
        });
    return;
  }
  deliver(self, id, true, "");
}

// Brings the links to the present and settles what finished on the way. Every handler calls it
// first, so a message that arrives at the instant a flow completes sees the completion.
void sync(self_ptr self) {
  auto& st = self->state;
  std::vector<link_model::op_done> done;
  st.links.advance(now_of(self), done);
  for (const auto& d : done) {
    uint64_t id = st.flow_to_transfer.at(d.flow);
    running_transfer& r = st.transfers.at(id);
    if (static_cast<move_kind>(r.msg.kind) == move_kind::swap_in)
      r.layer_done.push_back(d.at);
    if (d.last) {
      st.flow_to_transfer.erase(d.flow);
      finish(self, id);
    }
  }
  arm(self, st.options.clock, st.links);
}

void on_gpu_done(self_ptr self, uint64_t op, int32_t layer) {
  auto& st = self->state;
  auto c = st.computes.find(op);
  if (c != st.computes.end()) {
    if (layer >= 0)
      return;  // a compute's layers are not reported one by one
    compute_done d{c->second.req.step, true, st.options.gpu->stall_of(op), ""};
    c->second.promise.deliver(std::move(d));
    st.options.gpu->release(op);
    st.computes.erase(c);
    return;
  }
  auto t = st.op_to_transfer.find(op);
  KVTIER_ASSERT(t != st.op_to_transfer.end());
  uint64_t id = t->second;
  running_transfer& r = st.transfers.at(id);
  if (layer >= 0) {
    r.layer_done.push_back(now_of(self));
    return;
  }
  st.op_to_transfer.erase(t);
  r.measured_ns = st.options.gpu->duration_of(op);
  bool swap_in = static_cast<move_kind>(r.msg.kind) == move_kind::swap_in;
  std::string bad = swap_in ? st.options.gpu->check_arrived(r.msg) : std::string{};
  if (swap_in) {
    st.swap_in_ops.at(id).completed = true;
    release_if_done(self, id);
  } else {
    st.options.gpu->release(op);
  }
  if (!bad.empty())
    deliver(self, id, false, bad);
  else
    finish(self, id);
}

void submit_compute(self_ptr self, pending_compute p) {
  auto& st = self->state;
  uint64_t after = 0;
  uint64_t swap_in = p.req.after_swap_in;
  if (swap_in != 0) {
    auto it = st.swap_in_ops.find(swap_in);
    if (it != st.swap_in_ops.end()) {
      after = it->second.op;
      it->second.referenced = true;
    }
  }
  uint64_t op = st.options.gpu->submit_compute(p.req.lead_ns, p.req.layer_ns, after);
  st.computes.emplace(op, std::move(p));
  if (swap_in != 0)
    release_if_done(self, swap_in);
}

void on_compute(self_ptr self, pending_compute p) {
  auto& st = self->state;
  uint64_t swap_in = p.req.after_swap_in;
  auto t = st.transfers.find(swap_in);
  if (swap_in != 0 && t != st.transfers.end() && !t->second.started) {
    st.waiting_computes.emplace(swap_in, std::move(p));  // its swap-in still waits for a D2H
    return;
  }
  submit_compute(self, std::move(p));
}

transfer_engine_actor::behavior_type engine_behavior(self_ptr self,
                                                     transfer_engine_options options,
                                                     storage_actor storage) {
  auto& st = self->state;
  st.options = options;
  st.storage = std::move(storage);
  KVTIER_ASSERT(options.layers > 0 && options.block_bytes % options.layers == 0);
  auto& l = st.links.links();
  st.h2d = l.add_link("h2d", options.links.h2d_gbps);
  st.d2h = l.add_link("d2h", options.links.d2h_gbps);
  st.pcie = l.add_link("pcie_duplex", options.links.duplex_gbps);
  st.nic = l.add_link("nic", options.links.nic_gbps);
  return {
    [=](transfer& t) -> caf::result<transfer_done> {
      sync(self);
      auto& s = self->state;
      uint64_t id = t.id;
      running_transfer r;
      r.promise = self->make_response_promise<transfer_done>();
      auto promise = r.promise;
      bool go = ready_to_start(s, t);
      r.msg = std::move(t);
      s.transfers.emplace(id, std::move(r));
      if (go)
        start(self, id);
      return promise;
    },
    [=](report_atom) -> engine_report {
      auto& s = self->state;
      engine_report r = s.report;
      r.backend = s.options.gpu ? "cuda" : "modelled";
      if (s.options.gpu)
        r.device = s.options.gpu->device_name();
      for (const auto& ls : s.links.links().stats())
        r.links.push_back({ls.name, ls.bytes, ls.busy_ns, ls.flows});
      return r;
    },
    [=](wake_atom, uint64_t) { sync(self); },
    [=](compute_request& c) -> caf::result<compute_done> {
      sync(self);
      if (!self->state.options.gpu)
        return compute_done{c.step, false, 0, "the modelled engine runs no compute"};
      pending_compute p{std::move(c), self->make_response_promise<compute_done>()};
      auto promise = p.promise;
      on_compute(self, std::move(p));
      return promise;
    },
    [=](gpu_done_atom, uint64_t op, int32_t layer) {
      sync(self);
      on_gpu_done(self, op, layer);
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
