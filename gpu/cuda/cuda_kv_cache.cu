#include "gpu/cuda/cuda_kv_cache.cuh"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/check.hpp"
#include "gpu/memory_fit.hpp"

namespace kvtier::gpu {

namespace detail {

namespace {

/// Runs on CUDA's host-function thread. An exception cannot travel back to the caller from
/// there, so a throwing callback stops the process loudly instead of vanishing.
void CUDART_CB run_callback(void* arg) {
  const auto* call = static_cast<const callback_call*>(arg);
  try {
    (*call->callback)(call->id, call->layer);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvtier: the GPU completion callback threw: %s\n", e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "kvtier: the GPU completion callback threw\n");
    std::abort();
  }
}

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1ull << 30));
  return buf;
}

/// Allocates through `make`, adding what was being allocated, and the config keys that size
/// it, to the error.
template <class Buffer, class... Extra>
std::unique_ptr<Buffer> allocate(uint64_t bytes, const char* what, const char* keys = nullptr,
                                 Extra... extra) {
  try {
    return std::make_unique<Buffer>(bytes, extra...);
  } catch (const gpu_error& e) {
    std::string hint = keys ? std::string("; to fit, lower ") + keys : std::string();
    throw gpu_error(std::string("allocating ") + gib(bytes) + " of " + what + ": " + e.what()
                    + hint);
  }
}

/// Refuses tiers larger than the GPU's free or the host's available memory before anything is
/// allocated (memory_fit.hpp), and warns when the host pool leaves little of the host.
void check_memory_fit(const kv_cache_config& config, const kv_layout& layout,
                      uint64_t staging_bytes, const startup_progress& progress) {
  memory_ask ask;
  ask.device_bytes = config.memory == device_memory::attached ? 0 : layout.device_bytes();
  ask.device_bytes += staging_bytes;
  ask.host_bytes = layout.host_bytes();
  memory_free free;
  size_t device_free = 0, device_total = 0;
  KVTIER_CUDA_CHECK(cudaMemGetInfo(&device_free, &device_total));
  free.device_bytes = device_free;
  free.host_bytes = host_available_bytes();
  if (auto why = memory_refusal(ask, free))
    throw gpu_error(*why);
  if (auto warn = memory_warning(ask, free))
    progress.say("warning: " + *warn);
}

/// Pools this large are pinned by several threads; smaller ones in one call.
constexpr uint64_t parallel_pinning_bytes = 256ull << 20;

}  // namespace

cuda_kv_cache::cuda_kv_cache(const kv_cache_config& config, const device_info& info)
    : config_(config),
      info_(info),
      layout_{config.shape, config.block_size, config.device_blocks, config.host_blocks} {
  uint64_t slice = layout_.slice_bytes();
  staging_.slot_bytes = (std::max(config.staging_slot_bytes, slice) + 255) / 256 * 256;
  staging_.slot_count = config.staging_slots;
  staging_.direct_min_bytes = config.direct_min_bytes;
  staging_.slices_max = slot_ids_max;
  startup_progress progress(config.progress);
  check_memory_fit(config, layout_, 2 * staging_.slot_bytes * staging_.slot_count, progress);
  progress.begin(startup_phase::device_memory,
                 "allocating " + gib(config.memory == device_memory::attached
                                       ? 0 : layout_.device_bytes())
                   + " of device KV tensors (cache.device_tokens) on " + info.name);
  tensors_ = device_tensors::make(config, layout_);
  progress.end();
  unsigned threads = layout_.host_bytes() >= parallel_pinning_bytes ? touch_threads() : 0;
  progress.begin(startup_phase::host_pinning,
                 "pinning " + gib(layout_.host_bytes()) + " of host KV blocks (cache.host_tokens, "
                   + std::to_string(std::max(threads, 1u)) + " threads)");
  host_ = allocate<pinned_buffer>(layout_.host_bytes(), "pinned host KV blocks",
                                  "cache.host_tokens (or storage.capacity_tokens=0 and "
                                  "cache.host_tokens=0 for a device-only run)", threads);
  progress.end();
  for (lane* ln : {&h2d_, &d2h_}) {
    ln->slots = allocate<device_buffer>(staging_.slot_bytes * staging_.slot_count,
                                        "staging slots");
    for (uint32_t i = 0; i < staging_.slot_count; ++i) {
      ln->slot_ready.push_back(events_.take_untimed());
      ln->slot_free.push_back(events_.take_untimed());
    }
    ln->join = events_.take_untimed();
  }
  compute_mark_ = events_.take_untimed();
  check_result_ = std::make_unique<device_buffer>(sizeof(unsigned long long));
  check_readback_ = std::make_unique<pinned_buffer>(2 * sizeof(unsigned long long));
  preload_kernels();
  if (config.calibrate_compute) {
    progress.begin(startup_phase::compute_calibration, "calibrating the compute emulation");
    calibrate_compute();
    progress.end();
  }
  startup_ = progress.finish();
}

cuda_kv_cache::~cuda_kv_cache() {
  try {
    synchronize();
  } catch (const gpu_error& e) {
    std::fprintf(stderr, "kvtier: GPU work failed while closing the KV cache: %s\n", e.what());
  }
  for (cudaEvent_t e : ipc_events_)
    cudaEventDestroy(e);  // an opened IPC event is released the same way
}

void cuda_kv_cache::select_device() const {
  KVTIER_CUDA_CHECK(cudaSetDevice(config_.device_ordinal));
}

op_id cuda_kv_cache::add_op(op_kind kind, uint64_t bytes, uint32_t layer_events,
                            uint32_t begin_events) {
  op_id id = next_id_++;
  op_record& rec = ops_[id];
  rec.kind = kind;
  rec.bytes = bytes;
  rec.start = events_.take();
  rec.end = events_.take();
  for (uint32_t i = 0; i < layer_events; ++i)
    rec.layer_events.push_back(events_.take());
  for (uint32_t i = 0; i < begin_events; ++i)
    rec.begin_events.push_back(events_.take());
  return id;
}

cuda_kv_cache::op_record& cuda_kv_cache::find(op_id id) {
  auto it = ops_.find(id);
  if (it == ops_.end())
    throw gpu_error("unknown op " + std::to_string(id) + ": never submitted, or released");
  return it->second;
}

cudaEvent_t cuda_kv_cache::event_of(op_record& rec, op_id id, int layer) {
  if (layer == -1)
    return rec.end;
  if (rec.layer_events.empty())
    throw gpu_error("op " + std::to_string(id)
                    + " completes all layers at once: ask for layer -1");
  if (layer < 0 || static_cast<size_t>(layer) >= rec.layer_events.size())
    throw gpu_error("op " + std::to_string(id) + " has no layer " + std::to_string(layer)
                    + " (it has " + std::to_string(rec.layer_events.size()) + ")");
  return rec.layer_events[layer];
}

void cuda_kv_cache::notify_after(op_record& rec, op_id id, int layer, cudaEvent_t event,
                                 cudaStream_t notify) {
  if (!config_.on_complete)
    return;
  KVTIER_CUDA_CHECK(cudaStreamWaitEvent(notify, event, 0));
  auto call = std::make_unique<callback_call>(callback_call{&config_.on_complete, id, layer});
  KVTIER_CUDA_CHECK(cudaLaunchHostFunc(notify, run_callback, call.get()));
  rec.calls.push_back(std::move(call));
}

void cuda_kv_cache::close_notifications(op_record& rec, cudaStream_t notify) {
  if (rec.calls.empty())
    return;
  rec.notified = events_.take();
  KVTIER_CUDA_CHECK(cudaEventRecord(rec.notified, notify));
}

double cuda_kv_cache::elapsed_ns(cudaEvent_t from, cudaEvent_t to) const {
  float ms = 0;
  KVTIER_CUDA_CHECK(cudaEventElapsedTime(&ms, from, to));
  return static_cast<double>(ms) * 1e6;
}

tensor_view cuda_kv_cache::tensors() const {
  tensor_view v;
  for (uint32_t l = 0; l < layout_.shape.layers; ++l)
    v.layer_base[l] = tensors_->layer(l);
  v.tensor_bytes = layout_.tensor_bytes();
  v.chunk_bytes = layout_.chunk_bytes();
  v.layers = layout_.shape.layers;
  return v;
}

std::vector<layer_tensor_handle> cuda_kv_cache::export_layers() {
  select_device();
  return tensors_->export_layers();
}

std::vector<ipc_handle> cuda_kv_cache::create_ipc_events(uint32_t count) {
  select_device();
  if (!ipc_events_.empty())
    throw gpu_error("this cache has its IPC events already");
  std::vector<ipc_handle> out(count);
  ipc_events_owned_ = true;
  for (uint32_t i = 0; i < count; ++i) {
    cudaEvent_t e;
    KVTIER_CUDA_CHECK(
      cudaEventCreateWithFlags(&e, cudaEventInterprocess | cudaEventDisableTiming));
    ipc_events_.push_back(e);
    cudaIpcEventHandle_t h;
    KVTIER_CUDA_CHECK(cudaIpcGetEventHandle(&h, e));
    static_assert(sizeof h == ipc_handle_bytes, "CUDA's IPC event handle size changed");
    std::memcpy(out[i].data(), &h, sizeof h);
  }
  return out;
}

void cuda_kv_cache::open_ipc_events(const std::vector<ipc_handle>& handles) {
  select_device();
  if (!ipc_events_.empty())
    throw gpu_error("this cache has its IPC events already");
  for (size_t i = 0; i < handles.size(); ++i) {
    cudaIpcEventHandle_t h;
    std::memcpy(&h, handles[i].data(), sizeof h);
    cudaEvent_t e;
    cudaError_t err = cudaIpcOpenEventHandle(&e, h);
    if (err != cudaSuccess) {
      cudaGetLastError();
      throw gpu_error("cannot open IPC event " + std::to_string(i)
                      + " (cudaIpcOpenEventHandle): " + cudaGetErrorString(err));
    }
    ipc_events_.push_back(e);
  }
}

void cuda_kv_cache::signal_ipc_event(op_id h2d, uint32_t layer, uint32_t event) {
  select_device();
  op_record& rec = find(h2d);
  if (rec.kind != op_kind::h2d)
    throw gpu_error("op " + std::to_string(h2d) + " is not an H2D op");
  if (event >= ipc_events_.size())
    throw gpu_error("IPC event " + std::to_string(event) + " does not exist (there are "
                    + std::to_string(ipc_events_.size()) + ")");
  cudaStream_t s = signal_.get();
  KVTIER_CUDA_CHECK(cudaStreamWaitEvent(s, event_of(rec, h2d, static_cast<int>(layer)), 0));
  KVTIER_CUDA_CHECK(cudaEventRecord(ipc_events_[event], s));
}

bool cuda_kv_cache::layer_done(op_id id, int layer) {
  select_device();
  cudaError_t err = cudaEventQuery(event_of(find(id), id, layer));
  if (err == cudaErrorNotReady)
    return false;
  KVTIER_CUDA_CHECK(err);
  return true;
}

void cuda_kv_cache::wait(op_id id, int layer) {
  select_device();
  KVTIER_CUDA_CHECK(cudaEventSynchronize(event_of(find(id), id, layer)));
}

transfer_timing cuda_kv_cache::transfer_time(op_id id) {
  select_device();
  op_record& rec = find(id);
  if (rec.kind == op_kind::compute)
    throw gpu_error("op " + std::to_string(id) + " is a compute op, not a transfer");
  transfer_timing t;
  t.bytes = rec.bytes;
  t.total_ns = elapsed_ns(rec.start, rec.end);
  for (cudaEvent_t e : rec.layer_events)
    t.layer_done_ns.push_back(elapsed_ns(rec.start, e));
  return t;
}

compute_timing cuda_kv_cache::compute_time(op_id id) {
  select_device();
  op_record& rec = find(id);
  if (rec.kind != op_kind::compute)
    throw gpu_error("op " + std::to_string(id) + " is a transfer, not a compute op");
  compute_timing t;
  t.total_ns = elapsed_ns(rec.start, rec.end);
  for (size_t l = 0; l < rec.layer_events.size(); ++l) {
    cudaEvent_t first = rec.lead_end != nullptr ? rec.lead_end : rec.start;
    cudaEvent_t ready = l == 0 ? first : rec.layer_events[l - 1];
    t.begin_ns.push_back(elapsed_ns(rec.start, rec.begin_events[l]));
    t.busy_ns.push_back(elapsed_ns(rec.begin_events[l], rec.layer_events[l]));
    t.stall_ns.push_back(elapsed_ns(ready, rec.begin_events[l]));
    t.stall_total_ns += t.stall_ns.back();
  }
  return t;
}

double cuda_kv_cache::start_offset_ns(op_id from, op_id to) {
  select_device();
  return elapsed_ns(find(from).start, find(to).start);
}

void cuda_kv_cache::release(op_id id) {
  select_device();
  op_record& rec = find(id);
  KVTIER_CUDA_CHECK(cudaEventSynchronize(rec.end));
  if (rec.notified != nullptr) {
    KVTIER_CUDA_CHECK(cudaEventSynchronize(rec.notified));
    events_.give_back(rec.notified);
  }
  events_.give_back(rec.start);
  events_.give_back(rec.end);
  if (rec.lead_end != nullptr)
    events_.give_back(rec.lead_end);
  for (cudaEvent_t e : rec.layer_events)
    events_.give_back(e);
  for (cudaEvent_t e : rec.begin_events)
    events_.give_back(e);
  ops_.erase(id);
}

void cuda_kv_cache::synchronize() {
  select_device();
  for (const cuda_stream* s : {&h2d_.copy, &h2d_.kernel, &h2d_.notify, &d2h_.copy, &d2h_.kernel,
                               &d2h_.notify, &compute_, &compute_notify_, &signal_})
    KVTIER_CUDA_CHECK(cudaStreamSynchronize(s->get()));
}

std::byte* cuda_kv_cache::host_block(uint32_t block) {
  if (block >= layout_.host_blocks)
    throw gpu_error("host block " + std::to_string(block) + " is out of range [0, "
                    + std::to_string(layout_.host_blocks) + ")");
  return reinterpret_cast<std::byte*>(host_->get() + layout_.host_offset(block, 0, kv_half::key));
}

}  // namespace detail

std::unique_ptr<kv_cache> make_kv_cache(const kv_cache_config& config) {
  const std::string what = "cannot create the GPU KV cache: ";
  if (auto err = check_config(config))
    throw gpu_error(what + *err);
  device_info info = query_device(config.device_ordinal);
  if (!info.available)
    throw gpu_error(what + describe(info));
  // Before the cache's members exist: its streams and buffers belong to the current device.
  KVTIER_CUDA_CHECK(cudaSetDevice(config.device_ordinal));
  return std::make_unique<detail::cuda_kv_cache>(config, info);
}

}  // namespace kvtier::gpu
