#include "actors/device/cuda_device.hpp"

#include <cstdio>
#include <cstring>

#include "core/check.hpp"

namespace kvtier {

namespace {

std::vector<gpu::block_pair> pairs_of(const transfer& t) {
  std::vector<gpu::block_pair> out;
  out.reserve(t.blocks.size());
  for (const block_move& b : t.blocks)
    out.push_back({b.device_block, b.host_block});
  return out;
}

std::vector<gpu::block_pattern> patterns_of(const transfer& t) {
  std::vector<gpu::block_pattern> out;
  out.reserve(t.blocks.size());
  for (const block_move& b : t.blocks)
    out.push_back({b.device_block, b.hash});
  return out;
}

}  // namespace

cuda_device::cuda_device(const cuda_device_options& options) : options_(options) {
  if (!options.attach_later)
    cache_ = gpu::make_kv_cache(cache_config());
}

gpu::kv_cache_config cuda_device::cache_config() {
  gpu::kv_cache_config c;
  // Allocating and pinning large tiers takes seconds: say what happens (docs/gpu.md "Start-up").
  c.progress = [](const std::string& line) { std::fprintf(stderr, "kvtier: %s\n", line.c_str()); };
  c.shape = options_.shape;
  c.block_size = options_.block_size;
  c.device_blocks = options_.device_blocks;
  c.host_blocks = options_.host_blocks;
  c.on_complete = [this](uint64_t op, int layer) { on_complete(op, layer); };
  return c;
}

void cuda_device::attach(const engine_tensors& tensors) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (cache_)
    throw gpu::gpu_error("the device tensors are attached already");
  uint32_t layers = options_.shape.layers;
  if (tensors.event_slots == 0 || tensors.events.size() != uint64_t{tensors.event_slots} * layers)
    throw gpu::gpu_error("an engine's IPC events are event_slots x layers: got "
                         + std::to_string(tensors.events.size()) + " for "
                         + std::to_string(tensors.event_slots) + " slots of "
                         + std::to_string(layers) + " layers");
  gpu::kv_cache_config c = cache_config();
  c.memory = gpu::device_memory::attached;
  c.attach = tensors.layers;
  c.calibrate_compute = false;  // the engine computes, not kvtier
  auto cache = gpu::make_kv_cache(c);
  cache->open_ipc_events(tensors.events);
  cache_ = std::move(cache);
  event_slots_ = tensors.event_slots;
}

bool cuda_device::attached() const {
  return cache_ != nullptr;
}

void cuda_device::set_swap_in_hook(std::function<void(swap_in_signal)> hook) {
  std::lock_guard<std::mutex> guard(mutex_);
  swap_in_hook_ = std::move(hook);
}

swap_bench_result cuda_device::bench_swap(const std::vector<gpu::block_pattern>& targets,
                                          uint32_t repeats) {
  swap_bench_result out;
  std::vector<gpu::block_pair> pairs;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    KVTIER_ASSERT(cache_ && targets.size() <= options_.host_blocks);
    for (uint32_t i = 0; i < targets.size(); ++i) {
      gpu::fill_host_block(cache_->host_block(i), cache_->layout(), targets[i].hash);
      pairs.push_back({targets[i].block, i});
    }
  }
  out.bytes = targets.size() * block_bytes();
  for (uint32_t r = 0; r < repeats; ++r) {
    uint64_t op;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      op = cache_->submit_h2d(pairs);
      bench_ops_.insert(op);
      if (r + 1 == repeats && event_slots_ > 0) {
        out.slot = next_slot_++ % event_slots_;
        for (uint32_t l = 0; l < options_.shape.layers; ++l)
          cache_->signal_ipc_event(op, l, out.slot * options_.shape.layers + l);
      }
    }
    // Its completion callback takes the lock: wait for it unlocked, then release the op.
    std::unique_lock<std::mutex> lock(mutex_);
    bench_done_.wait(lock, [&] { return bench_ops_.count(op) == 0; });
    gpu::transfer_timing t = cache_->transfer_time(op);
    cache_->release(op);
    out.gbps.push_back(static_cast<double>(t.bytes) / t.total_ns);
  }
  return out;
}

void cuda_device::set_sinks(sink copies, sink computes) {
  std::lock_guard<std::mutex> guard(mutex_);
  copies_ = std::move(copies);
  computes_ = std::move(computes);
}

void cuda_device::set_compute_sink(sink computes) {
  std::lock_guard<std::mutex> guard(mutex_);
  computes_ = std::move(computes);
}

// On a CUDA thread. The lock also waits out a submit whose op completes before it is recorded.
void cuda_device::on_complete(uint64_t op, int layer) {
  sink target;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (bench_ops_.count(op) > 0) {
      if (layer == -1) {
        bench_ops_.erase(op);
        bench_done_.notify_all();
      }
      return;
    }
    if (compute_ops_.count(op) > 0) {
      if (layer >= 0)
        return;  // a compute's layers are not reported one by one
      target = computes_;
    } else {
      KVTIER_ASSERT(copy_ops_.count(op) > 0);
      target = copies_;
    }
  }
  if (target)
    target(op, layer);
}

gpu::startup_timing cuda_device::startup() const {
  return cache_ ? cache_->startup() : gpu::startup_timing{};
}

std::string cuda_device::device_name() const {
  return cache_ ? cache_->device().name : std::string("(no engine attached yet)");
}

void cuda_device::expect_swap_in(uint64_t transfer) {
  std::lock_guard<std::mutex> guard(mutex_);
  KVTIER_ASSERT(transfer > last_expected_);
  last_expected_ = transfer;
  swap_ins_[transfer];
}

uint64_t cuda_device::submit_copy(const transfer& t) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (is_d2h(t.kind)) {
    uint64_t op = cache_->submit_d2h(pairs_of(t));
    copy_ops_[op] = 0;
    return op;
  }
  KVTIER_ASSERT(t.kind == transfer_kind::swap_in);
  uint64_t op = cache_->submit_h2d(pairs_of(t));
  copy_ops_[op] = t.id;
  if (event_slots_ > 0) {
    // The engine waits on the slot's events once told, which is after this record: an IPC
    // wait waits for the record before it.
    swap_in_signal sig{t.id, next_slot_++ % event_slots_, patterns_of(t)};
    for (uint32_t l = 0; l < options_.shape.layers; ++l)
      cache_->signal_ipc_event(op, l, sig.slot * options_.shape.layers + l);
    if (swap_in_hook_)
      swap_in_hook_(std::move(sig));
  }
  swap_in_op& s = swap_ins_.at(t.id);
  s.op = op;
  for (parked_compute& p : s.parked) {
    s.referenced = true;
    submit_compute_locked(p.step, p.lead_ns, p.layer_ns, op);
  }
  s.parked.clear();
  return op;
}

void cuda_device::fill(const transfer& t) {
  std::lock_guard<std::mutex> guard(mutex_);
  cache_->fill_device_blocks(patterns_of(t));
}

std::string cuda_device::check_device_blocks(const transfer& t) {
  std::lock_guard<std::mutex> guard(mutex_);
  auto bad = cache_->check_device_blocks(patterns_of(t));
  return bad ? to_string(*bad) : std::string{};
}

std::string cuda_device::check_host_block(const block_move& b) {
  std::lock_guard<std::mutex> guard(mutex_);
  auto bad = gpu::check_host_block(cache_->host_block(b.host_block), cache_->layout(), b.hash,
                                   b.host_block);
  return bad ? to_string(*bad) : std::string{};
}

std::vector<uint8_t> cuda_device::host_payload(uint32_t host_block) {
  std::lock_guard<std::mutex> guard(mutex_);
  const auto* p = reinterpret_cast<const uint8_t*>(cache_->host_block(host_block));
  return std::vector<uint8_t>(p, p + block_bytes());
}

void cuda_device::write_host_block(uint32_t host_block, const std::vector<uint8_t>& bytes) {
  std::lock_guard<std::mutex> guard(mutex_);
  KVTIER_ASSERT(bytes.size() == block_bytes());
  std::memcpy(cache_->host_block(host_block), bytes.data(), bytes.size());
}

payload_destination cuda_device::host_destination(uint32_t host_block) {
  std::lock_guard<std::mutex> guard(mutex_);
  return {reinterpret_cast<uint64_t>(cache_->host_block(host_block)), block_bytes()};
}

void cuda_device::release_if_done_locked(uint64_t transfer) {
  auto it = swap_ins_.find(transfer);
  if (it != swap_ins_.end() && it->second.completed && it->second.referenced) {
    copy_ops_.erase(it->second.op);
    cache_->release(it->second.op);
    swap_ins_.erase(it);
  }
}

int64_t cuda_device::copy_completed(uint64_t op) {
  std::lock_guard<std::mutex> guard(mutex_);
  auto took = static_cast<int64_t>(cache_->transfer_time(op).total_ns);
  uint64_t transfer = copy_ops_.at(op);
  if (transfer == 0) {  // a D2H: nothing waits on it
    copy_ops_.erase(op);
    cache_->release(op);
    return took;
  }
  swap_ins_.at(transfer).completed = true;
  release_if_done_locked(transfer);
  return took;
}

uint64_t cuda_device::submit_compute_locked(uint64_t step, int64_t lead_ns,
                                            const std::vector<int64_t>& layer_ns,
                                            uint64_t after_op) {
  std::vector<uint64_t> ns(layer_ns.begin(), layer_ns.end());
  uint64_t op = cache_->submit_compute(ns, after_op, static_cast<uint64_t>(lead_ns));
  compute_ops_[op] = step;
  return op;
}

uint64_t cuda_device::submit_compute(uint64_t step, int64_t lead_ns, std::vector<int64_t> layer_ns,
                                     uint64_t after_swap_in) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (after_swap_in == 0)
    return submit_compute_locked(step, lead_ns, layer_ns, 0);
  auto it = swap_ins_.find(after_swap_in);
  if (it == swap_ins_.end() && after_swap_in <= last_expected_)
    return submit_compute_locked(step, lead_ns, layer_ns, 0);  // complete and released
  swap_in_op& s = swap_ins_[after_swap_in];  // expected, or still to be registered
  if (s.op == 0) {
    s.parked.push_back({step, lead_ns, std::move(layer_ns)});
    return 0;
  }
  s.referenced = true;
  uint64_t op = submit_compute_locked(step, lead_ns, layer_ns, s.op);
  release_if_done_locked(after_swap_in);
  return op;
}

std::pair<uint64_t, int64_t> cuda_device::compute_completed(uint64_t op) {
  std::lock_guard<std::mutex> guard(mutex_);
  uint64_t step = compute_ops_.at(op);
  compute_ops_.erase(op);
  auto stall = static_cast<int64_t>(cache_->compute_time(op).stall_total_ns);
  cache_->release(op);
  return {step, stall};
}

}  // namespace kvtier
