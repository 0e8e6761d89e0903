#include "actors/device/engine_device.hpp"

#include "core/check.hpp"

namespace kvtier {

engine_device::engine_device(const engine_device_options& options) : options_(options) {
  if (options.event_slots == 0)
    throw gpu::gpu_error("an engine needs at least one IPC event slot");
  gpu::kv_cache_config c;
  c.shape = options.shape;
  c.block_size = options.block_size;
  c.device_blocks = options.device_blocks;
  c.host_blocks = 0;  // kvtier's pinned pool is the server's
  c.memory = gpu::device_memory::own_exported;
  // Completions come on a CUDA thread. The sink is set before the first compute and never
  // changes, so the callback reads it without the lock (which a check may hold meanwhile).
  c.on_complete = [this](uint64_t op, int layer) {
    if (layer == -1 && computes_)
      computes_(op, layer);
  };
  cache_ = gpu::make_kv_cache(c);
  tensors_ = cache_->export_layers();
  events_ = cache_->create_ipc_events(options.event_slots * options.shape.layers);
}

std::string engine_device::device_name() const {
  return cache_->device().name;
}

void engine_device::set_compute_sink(sink computes) {
  std::lock_guard<std::mutex> guard(mutex_);
  computes_ = std::move(computes);
}

std::vector<uint32_t> engine_device::slot_events(uint32_t slot) const {
  std::vector<uint32_t> out;
  for (uint32_t l = 0; l < options_.shape.layers; ++l)
    out.push_back(slot * options_.shape.layers + l);
  return out;
}

uint64_t engine_device::expect_swap_in(uint32_t slot, std::vector<gpu::block_pattern> blocks) {
  std::lock_guard<std::mutex> guard(mutex_);
  KVTIER_ASSERT(slot < options_.event_slots);
  uint64_t id = next_swap_in_++;
  swap_ins_[id] = pending_swap_in{slot, std::move(blocks)};
  return id;
}

uint64_t engine_device::submit_compute(uint64_t step, int64_t lead_ns,
                                       std::vector<int64_t> layer_ns, uint64_t after_swap_in) {
  std::lock_guard<std::mutex> guard(mutex_);
  std::vector<uint64_t> ns(layer_ns.begin(), layer_ns.end());
  running_compute run{step, {}};
  uint64_t op;
  auto it = swap_ins_.find(after_swap_in);
  if (after_swap_in != 0 && it != swap_ins_.end()) {
    op = cache_->submit_compute_after_events(ns, slot_events(it->second.slot),
                                             static_cast<uint64_t>(lead_ns));
    if (options_.verify)
      run.check = std::move(it->second.blocks);
    swap_ins_.erase(it);
  } else {
    KVTIER_ASSERT(after_swap_in == 0);  // every swap-in is announced before its compute
    op = cache_->submit_compute(ns, 0, static_cast<uint64_t>(lead_ns));
  }
  computes_running_[op] = std::move(run);
  return op;
}

uint64_t engine_device::check_locked(const std::vector<gpu::block_pattern>& blocks) {
  if (blocks.empty() || !cache_->check_device_blocks(blocks))
    return 0;
  // Something differs: count the blocks one by one.
  uint64_t bad = 0;
  for (const gpu::block_pattern& b : blocks)
    if (auto m = cache_->check_device_blocks({b})) {
      ++bad;
      if (counts_.first.empty())
        counts_.first = to_string(*m);
    }
  return bad;
}

std::pair<uint64_t, int64_t> engine_device::compute_completed(uint64_t op) {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = computes_running_.find(op);
  KVTIER_ASSERT(it != computes_running_.end());
  running_compute run = std::move(it->second);
  computes_running_.erase(it);
  auto stall = static_cast<int64_t>(cache_->compute_time(op).stall_total_ns);
  cache_->release(op);
  if (!run.check.empty()) {
    // Every layer event of the swap-in passed before this compute's layers ran; the check runs
    // behind them on the same stream.
    ++counts_.swap_ins;
    counts_.blocks += run.check.size();
    counts_.mismatches += check_locked(run.check);
  }
  return {run.step, stall};
}

uint64_t engine_device::wait_and_check(uint32_t slot,
                                       const std::vector<gpu::block_pattern>& blocks) {
  std::lock_guard<std::mutex> guard(mutex_);
  KVTIER_ASSERT(slot < options_.event_slots);
  std::vector<uint64_t> none(options_.shape.layers, 0);
  uint64_t op = cache_->submit_compute_after_events(none, slot_events(slot), 0);
  cache_->wait(op);
  cache_->release(op);
  ++counts_.swap_ins;
  counts_.blocks += blocks.size();
  uint64_t bad = check_locked(blocks);
  counts_.mismatches += bad;
  return bad;
}

engine_verify_counts engine_device::verified() const {
  std::lock_guard<std::mutex> guard(mutex_);
  return counts_;
}

}  // namespace kvtier
