// The transfer methods. Each issues its work between begin_op() and finish_op(); H2D methods
// mark one event per layer as soon as that layer's work is issued, so a layer completes as soon
// as its own bytes are in place.

#include <algorithm>

#include "core/check.hpp"
#include "gpu/cuda/cuda_kv_cache.cuh"

namespace kvtier::gpu::detail {

namespace {

/// Copies per cudaMemcpyBatchAsync call: bounds the host arrays the driver reads per call.
constexpr size_t batch_copies_max = 4096;

struct copy_list {
  std::vector<void*> dsts;
  std::vector<const void*> srcs;
  std::vector<size_t> sizes;

  void add(void* dst, const void* src, size_t bytes) {
    dsts.push_back(dst);
    srcs.push_back(src);
    sizes.push_back(bytes);
  }
};

/// Issues the list as few driver calls as possible: one plain copy, or batches.
void issue(copy_list& list, cudaStream_t stream) {
  size_t n = list.dsts.size();
  if (n == 0)
    return;
  if (n == 1) {
    KVTIER_CUDA_CHECK(
        cudaMemcpyAsync(list.dsts[0], list.srcs[0], list.sizes[0], cudaMemcpyDefault, stream));
    return;
  }
  cudaMemcpyAttributes attr = {};
  attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
  size_t attr_first = 0;
  for (size_t i = 0; i < n; i += batch_copies_max) {
    size_t count = std::min(batch_copies_max, n - i);
    KVTIER_CUDA_CHECK(cudaMemcpyBatchAsync(list.dsts.data() + i, list.srcs.data() + i,
                                           list.sizes.data() + i, count, &attr, &attr_first, 1,
                                           stream));
  }
}

}  // namespace

op_id cuda_kv_cache::submit_h2d(const std::vector<block_pair>& pairs, transfer_method method) {
  return submit_transfer(pairs, method, transfer_direction::h2d);
}

op_id cuda_kv_cache::submit_d2h(const std::vector<block_pair>& pairs, transfer_method method) {
  return submit_transfer(pairs, method, transfer_direction::d2h);
}

op_id cuda_kv_cache::submit_transfer(const std::vector<block_pair>& pairs,
                                     transfer_method method, transfer_direction d) {
  select_device();
  if (auto err = check_pairs(pairs, d, layout_.device_blocks, layout_.host_blocks))
    throw gpu_error(std::string(to_string(d)) + " transfer rejected: " + *err);
  if (method == transfer_method::automatic)
    method = default_method(d);
  bool h2d = d == transfer_direction::h2d;
  lane& ln = h2d ? h2d_ : d2h_;
  op_id id = add_op(h2d ? op_kind::h2d : op_kind::d2h,
                    pairs.size() * layout_.host_block_bytes(), h2d ? layout_.shape.layers : 0,
                    0);
  op_record& rec = ops_.at(id);
  // A D2H reads blocks that compute submitted earlier may still be producing.
  begin_op(rec, ln, !h2d);
  switch (method) {
    case transfer_method::per_chunk:
      run_per_chunk(pairs, d, rec, ln);
      break;
    case transfer_method::batched:
      run_batched(pairs, d, rec, ln);
      break;
    case transfer_method::staging:
      run_staging(pairs, d, rec, ln);
      break;
    case transfer_method::zero_copy:
      run_zero_copy(pairs, d, rec, ln);
      break;
    case transfer_method::automatic:  // resolved above
      KVTIER_ASSERT(false);
      break;
  }
  finish_op(rec, id, ln);
  return id;
}

op_id cuda_kv_cache::submit_bulk(transfer_direction d, uint64_t bytes, uint64_t device_offset,
                                 uint64_t host_offset) {
  select_device();
  if (bytes == 0 || device_offset + bytes > tensors_->contiguous_bytes()
      || host_offset + bytes > layout_.host_bytes())
    throw gpu_error("bulk copy of " + std::to_string(bytes) + " bytes at device offset "
                    + std::to_string(device_offset) + ", host offset "
                    + std::to_string(host_offset) + " does not fit the contiguous device memory ("
                    + std::to_string(tensors_->contiguous_bytes()) + " bytes) and the host pool ("
                    + std::to_string(layout_.host_bytes()) + " bytes)");
  bool h2d = d == transfer_direction::h2d;
  lane& ln = h2d ? h2d_ : d2h_;
  op_id id = add_op(op_kind::bulk, bytes, 0, 0);
  op_record& rec = ops_.at(id);
  begin_op(rec, ln, false);
  uint8_t* dev = tensors_->layer(0) + device_offset;
  uint8_t* host = host_->get() + host_offset;
  KVTIER_CUDA_CHECK(cudaMemcpyAsync(h2d ? dev : host, h2d ? host : dev, bytes,
                                    h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost,
                                    ln.copy.get()));
  finish_op(rec, id, ln);
  return id;
}

void cuda_kv_cache::begin_op(op_record& rec, lane& ln, bool after_compute) {
  if (after_compute) {
    KVTIER_CUDA_CHECK(cudaEventRecord(compute_mark_, compute_.get()));
    KVTIER_CUDA_CHECK(cudaStreamWaitEvent(ln.copy.get(), compute_mark_, 0));
  }
  KVTIER_CUDA_CHECK(cudaEventRecord(rec.start, ln.copy.get()));
  KVTIER_CUDA_CHECK(cudaStreamWaitEvent(ln.kernel.get(), rec.start, 0));
}

void cuda_kv_cache::mark(lane& ln, cudaEvent_t event) {
  KVTIER_CUDA_CHECK(cudaEventRecord(ln.join, ln.copy.get()));
  KVTIER_CUDA_CHECK(cudaStreamWaitEvent(ln.kernel.get(), ln.join, 0));
  KVTIER_CUDA_CHECK(cudaEventRecord(event, ln.kernel.get()));
}

void cuda_kv_cache::finish_op(op_record& rec, op_id id, lane& ln) {
  mark(ln, rec.end);
  KVTIER_CUDA_CHECK(cudaStreamWaitEvent(ln.copy.get(), rec.end, 0));
  for (size_t l = 0; l < rec.layer_events.size(); ++l)
    notify_after(rec, id, static_cast<int>(l), rec.layer_events[l], ln.notify.get());
  notify_after(rec, id, -1, rec.end, ln.notify.get());
  close_notifications(rec, ln.notify.get());
}

void cuda_kv_cache::run_per_chunk(const std::vector<block_pair>& pairs, transfer_direction d,
                                  op_record& rec, lane& ln) {
  bool h2d = d == transfer_direction::h2d;
  uint64_t chunk = layout_.chunk_bytes();
  cudaMemcpyKind kind = h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost;
  for (uint32_t l = 0; l < layout_.shape.layers; ++l) {
    for (const block_pair& p : pairs) {
      for (kv_half half : {kv_half::key, kv_half::value}) {
        uint8_t* dev = tensors_->at(layout_.device_offset(p.device, l, half));
        uint8_t* host = host_->get() + layout_.host_offset(p.host, l, half);
        KVTIER_CUDA_CHECK(
            cudaMemcpyAsync(h2d ? dev : host, h2d ? host : dev, chunk, kind, ln.copy.get()));
      }
    }
    if (h2d)
      mark(ln, rec.layer_events[l]);
  }
}

void cuda_kv_cache::run_batched(const std::vector<block_pair>& pairs, transfer_direction d,
                                op_record& rec, lane& ln) {
  bool h2d = d == transfer_direction::h2d;
  uint64_t chunk = layout_.chunk_bytes();
  for (uint32_t l = 0; l < layout_.shape.layers; ++l) {
    copy_list list;
    for (const block_pair& p : pairs) {
      for (kv_half half : {kv_half::key, kv_half::value}) {
        uint8_t* dev = tensors_->at(layout_.device_offset(p.device, l, half));
        uint8_t* host = host_->get() + layout_.host_offset(p.host, l, half);
        list.add(h2d ? dev : host, h2d ? host : dev, chunk);
      }
    }
    issue(list, ln.copy.get());
    if (h2d)
      mark(ln, rec.layer_events[l]);
  }
}

void cuda_kv_cache::run_zero_copy(const std::vector<block_pair>& pairs, transfer_direction d,
                                  op_record& rec, lane& ln) {
  bool h2d = d == transfer_direction::h2d;
  zero_copy_args args;
  args.tensors = tensors();
  args.host = host_->device_view();
  args.host_block_bytes = layout_.host_block_bytes();
  // H2D: one layer per pass, so each layer can complete; D2H: every layer in one pass.
  uint32_t passes = h2d ? layout_.shape.layers : 1;
  args.layer_count = h2d ? 1 : layout_.shape.layers;
  for (uint32_t pass = 0; pass < passes; ++pass) {
    args.layer_first = pass;
    for (size_t first = 0; first < pairs.size(); first += zero_copy_pairs_max) {
      args.pair_count = static_cast<uint32_t>(std::min<size_t>(zero_copy_pairs_max,
                                                               pairs.size() - first));
      for (uint32_t k = 0; k < args.pair_count; ++k) {
        args.device_ids[k] = pairs[first + k].device;
        args.host_ids[k] = pairs[first + k].host;
      }
      launch_zero_copy(args, d, config_.zero_copy_ctas, ln.kernel.get());
    }
    if (h2d)
      mark(ln, rec.layer_events[pass]);
  }
}

void cuda_kv_cache::run_staging(const std::vector<block_pair>& pairs, transfer_direction d,
                                op_record& rec, lane& ln) {
  bool h2d = d == transfer_direction::h2d;
  staging_plan plan = plan_staging(layout_, pairs, d, staging_);
  for (const plan_step& step : plan.steps) {
    copy_strided(step.direct, nullptr, d, ln.copy.get());
    for (const staged_slot& slot : step.slots)
      run_slot(plan, slot, d, ln);
    if (!h2d)
      continue;
    // Without direct copies the layer's last scatter follows all of its copies already.
    if (step.direct.empty())
      KVTIER_CUDA_CHECK(cudaEventRecord(rec.layer_events[step.layer], ln.kernel.get()));
    else
      mark(ln, rec.layer_events[step.layer]);
  }
}

/// Double buffering through events: a slot is refilled only once its consumer has finished with
/// it, so the copy of one slot overlaps the kernel of the next.
void cuda_kv_cache::run_slot(const staging_plan& plan, const staged_slot& slot,
                             transfer_direction d, lane& ln) {
  slot_args args;
  args.tensors = tensors();
  args.slot = ln.slots->get() + slot.buffer * staging_.slot_bytes;
  args.window = slot.window;
  uint32_t n = pairs_touched(slot.window);
  KVTIER_ASSERT(n <= slot_ids_max);
  for (uint32_t k = 0; k < n; ++k)
    args.device_ids[k] = plan.pairs[slot.window.first_pair + k].device;
  cudaStream_t copy = ln.copy.get();
  cudaStream_t kernel = ln.kernel.get();
  cudaEvent_t ready = ln.slot_ready[slot.buffer];
  cudaEvent_t drained = ln.slot_free[slot.buffer];
  if (d == transfer_direction::h2d) {
    KVTIER_CUDA_CHECK(cudaStreamWaitEvent(copy, drained, 0));
    copy_strided(slot.host_copies, args.slot, d, copy);
    KVTIER_CUDA_CHECK(cudaEventRecord(ready, copy));
    KVTIER_CUDA_CHECK(cudaStreamWaitEvent(kernel, ready, 0));
    launch_scatter(args, kernel);
    KVTIER_CUDA_CHECK(cudaEventRecord(drained, kernel));
  } else {
    KVTIER_CUDA_CHECK(cudaStreamWaitEvent(kernel, drained, 0));
    launch_gather(args, kernel);
    KVTIER_CUDA_CHECK(cudaEventRecord(ready, kernel));
    KVTIER_CUDA_CHECK(cudaStreamWaitEvent(copy, ready, 0));
    copy_strided(slot.host_copies, args.slot, d, copy);
    KVTIER_CUDA_CHECK(cudaEventRecord(drained, copy));
  }
}

void cuda_kv_cache::copy_strided(const std::vector<strided_copy>& copies, uint8_t* other,
                                 transfer_direction d, cudaStream_t stream) {
  bool h2d = d == transfer_direction::h2d;
  copy_list rows;
  for (const strided_copy& c : copies) {
    uint8_t* host = host_->get() + c.host_offset;
    uint8_t* oth = other != nullptr ? other + c.other_offset : tensors_->at(c.other_offset);
    if (c.rows == 1) {
      rows.add(h2d ? oth : host, h2d ? host : oth, c.row_bytes);
    } else if (h2d) {
      KVTIER_CUDA_CHECK(cudaMemcpy2DAsync(oth, c.other_pitch, host, c.host_pitch, c.row_bytes,
                                          c.rows, cudaMemcpyHostToDevice, stream));
    } else {
      KVTIER_CUDA_CHECK(cudaMemcpy2DAsync(host, c.host_pitch, oth, c.other_pitch, c.row_bytes,
                                          c.rows, cudaMemcpyDeviceToHost, stream));
    }
  }
  issue(rows, stream);
}

}  // namespace kvtier::gpu::detail
