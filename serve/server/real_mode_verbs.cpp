// Real mode (kvtier serve --backend cuda or shm, docs/protocol.md): the engine's tensors
// attached at hello or by `attach`, bench_swap, and the swap-in signals that step replies wait
// for.

#include <algorithm>

#include "gpu/bench/bench_blocks.hpp"
#include "serve/server/server_state.hpp"
#include "serve/wire/session_replies.hpp"

namespace kvtier::serve {

namespace {

const char* backend_flag(const server_settings& s) {
  return s.backend == copy_backend_kind::shm ? "--backend shm" : "--backend cuda";
}

// The engine's tensors and signals as the device takes them.
engine_tensors tensors_of(const attach_request& t) {
  engine_tensors et;
  et.memory = t.memory == tensor_memory::shm ? engine_memory::shm : engine_memory::cuda_ipc;
  for (size_t l = 0; l < t.layer_offsets.size(); ++l) {
    gpu::layer_tensor_handle h;
    if (et.memory == engine_memory::shm)
      h.segment = t.layer_segments[l];
    else
      std::copy(t.layer_handles[l].begin(), t.layer_handles[l].end(), h.handle.begin());
    h.offset = t.layer_offsets[l];
    et.layers.push_back(h);
  }
  for (const ipc_bytes& e : t.events) {
    gpu::ipc_handle h;
    std::copy(e.begin(), e.end(), h.begin());
    et.events.push_back(h);
  }
  et.strides = {t.half_stride, t.block_stride};
  et.signals = t.signals;
  et.event_slots = t.event_slots;
  return et;
}

// Why `t` does not fit this server, if it does not (before anything is opened).
std::optional<std::string> misfit(const server_settings& s, const attach_request& t) {
  bool shm = s.backend == copy_backend_kind::shm;
  if ((t.memory == tensor_memory::shm) != shm)
    return std::string("tensors.memory is '")
           + (t.memory == tensor_memory::shm ? "shm" : "cuda_ipc") + "'; kvtier serve "
           + backend_flag(s) + " attaches tensors " + (shm ? "in shared memory ('shm')"
                                                            : "through CUDA IPC ('cuda_ipc')");
  if (t.layer_offsets.size() != s.layers)
    return "tensors.layers has " + std::to_string(t.layer_offsets.size())
           + " entries; the model has " + std::to_string(s.layers) + " layers";
  if (t.device_blocks != s.device_blocks)
    return "tensors.device_blocks is " + std::to_string(t.device_blocks)
           + "; the server's device tier holds " + std::to_string(s.device_blocks)
           + " blocks (cache.device_tokens / cache.block_size): size the tensors alike";
  if (t.event_slots == 0 || t.event_slots > 64)
    return "tensors.event_slots must be in [1, 64], got " + std::to_string(t.event_slots);
  if (!shm && t.events.size() != uint64_t{t.event_slots} * s.layers)
    return "tensors.events has " + std::to_string(t.events.size()) + " handles; event_slots x "
           "layers is " + std::to_string(uint64_t{t.event_slots} * s.layers);
  gpu::kv_layout layout{s.model, s.block_size, s.device_blocks, 0, {t.half_stride,
                                                                       t.block_stride}};
  if (auto bad = gpu::check_shape(s.model, s.block_size))
    return "the server's model has no real-mode layout: " + *bad;
  if (auto bad = gpu::check_strides(layout))
    return "tensors.half_stride and tensors.block_stride: " + *bad;
  return std::nullopt;
}

// Opens `t` (the first time) or checks that it names the tensors attached already.
std::optional<std::string> attach_once(self_ptr self, const attach_request& t) {
  auto& st = self->state;
  const auto& s = st.settings;
  if (auto bad = misfit(s, t))
    return bad;
  if (st.attached) {
    if (*st.attached != t)
      return std::string("this server is attached to another engine's tensors (one engine's "
                         "tensors per server); restart it to attach these");
    return std::nullopt;
  }
  try {
    s.gpu->attach(tensors_of(t));
  } catch (const std::exception& e) {
    return std::string("cannot attach the engine's tensors: ") + e.what();
  }
  st.attached = t;
  return std::nullopt;
}

}  // namespace

// Real mode: the engine's tensors are opened at the first hello or `attach` that carries them;
// later ones (a reconnect, a second link of the same engine) must name the same ones, and a
// hello may leave them out once they are attached. Returns why the hello is refused.
std::optional<std::string> attach_tensors(self_ptr self, const call& c, uint32_t version) {
  auto& st = self->state;
  const auto& s = st.settings;
  const attach_request& t = c.tensors;
  if (!s.gpu) {
    if (t.present)
      return std::string("this server models the device (kvtier serve without --backend cuda "
                         "or shm): it cannot attach an engine's tensors; start it with a real "
                         "backend, or leave 'tensors' out");
    return std::nullopt;
  }
  if (version < attach_version)
    return std::string("kvtier serve ") + backend_flag(s) + " runs its copies on the engine's "
           "KV tensors: it needs protocol version " + std::to_string(attach_version)
           + " or later; the versions offered allow " + std::to_string(version);
  if (!t.present) {
    if (st.attached)
      return std::nullopt;
    return std::string("kvtier serve ") + backend_flag(s) + " runs its copies on the engine's "
           "KV tensors: hello must carry 'tensors', or the engine's worker must `attach` them "
           "first (docs/protocol.md, real mode)";
  }
  return attach_once(self, t);
}

void do_attach(self_ptr self, ctx& x) {
  auto& st = self->state;
  const auto& s = st.settings;
  if (!s.gpu)
    return fail(self, x.to, error_kind::bad_request,
                "this server models the device (kvtier serve without --backend cuda or shm): "
                "it cannot attach an engine's tensors; start it with a real backend");
  if (auto m = model_mismatch(x.c, s))
    return fail(self, x.to, error_kind::model_mismatch,
                m->field + " is " + m->theirs + ", the server's is " + m->ours);
  if (auto bad = attach_once(self, x.c.tensors))
    return fail(self, x.to, error_kind::bad_request, *bad);
  msgpack::sbuffer buf;
  encode_attach_reply(buf, x.c.id, {s.layers, s.device_blocks,
                                    gpu::kv_layout{s.model, s.block_size}.host_block_bytes(),
                                    s.verify});
  answer(self, x.to, buf);
}

// Real mode, before any request: loads host blocks into the engine's tensors and times it on the
// device (docs/protocol.md, bench_swap). It overwrites device and host blocks, so it runs only
// while no request was ever allocated.
void do_bench_swap(self_ptr self, ctx& x) {
  auto& st = self->state;
  const auto& s = st.settings;
  const call& c = x.c;
  auto refuse = [&](const std::string& why) { fail(self, x.to, error_kind::bad_request, why); };
  if (st.directory->next_request.load() != 1 || st.directory->next_step.load() != 1)
    return refuse("bench_swap overwrites device and host blocks: it runs only before the "
                  "server's first allocate and step");
  if (!s.gpu || !s.gpu->attached())
    return refuse("bench_swap needs an attached engine (kvtier serve --backend cuda)");
  uint32_t most = std::min(s.device_blocks, s.host_blocks);
  if (c.blocks == 0 || c.blocks > most)
    return refuse("'blocks' must be in [1, " + std::to_string(most)
                  + "] (the smaller of the device and host tiers)");
  // Host blocks [0, n) into device blocks placed as `kvtier bench transfer` places its H2D
  // targets (shuffled, half of them in runs of up to 32), so that the two figures compare.
  gpu::bench_options placing;
  std::vector<uint32_t> ids =
    gpu::bench::shuffled_runs(placing.seed, s.device_blocks, placing.run_share,
                              placing.run_length_max);
  constexpr uint64_t hash_base = 0x62656e6368000000;  // "bench": any fixed base will do
  std::vector<gpu::block_pattern> targets;
  for (uint32_t i = 0; i < c.blocks; ++i)
    targets.push_back({ids[i], hash_base + i});
  swap_bench_result r = s.gpu->bench_swap(targets, c.repeats);
  msgpack::sbuffer buf;
  encode_bench_swap_reply(buf, c.id, {r.bytes, r.gbps, r.slot, s.layers, targets});
  answer(self, x.to, buf);
}

void on_swap_in_submitted(self_ptr self, swap_in_signal sig) {
  auto& s = self->state;
  if (auto p = s.parked.find(sig.transfer); p != s.parked.end()) {
    auto reply = std::move(p->second);
    s.parked.erase(p);
    return reply(sig);
  }
  bool fresh = s.signals.emplace(sig.transfer, std::move(sig)).second;
  KVTIER_ASSERT(fresh);  // a transfer's swap-in is submitted once
}

}  // namespace kvtier::serve
