// Compute emulation: a forward pass as one busy kernel per layer on the compute stream. With an
// H2D op to follow, the stream waits for that op's layer event before each layer, so layer l
// runs as soon as its KV is in place, overlapping the transfer of later layers, and the time it
// waited is the stall that a real model would see.
//
//   ready_l --(wait for H2D layer l)--> begin_l --(busy kernel)--> done_l = ready_(l+1)

#include <algorithm>
#include <cmath>

#include "actors/check.hpp"
#include "gpu/cuda/cuda_kv_cache.cuh"

namespace kvtier::gpu::detail {

namespace {

constexpr uint64_t probe_ns[] = {10'000, 20'000, 100'000, 500'000, 2'000'000};
/// Shorter requests are met to about the global timer's tick, not to a share of themselves.
constexpr uint64_t accuracy_floor_ns = 20'000;
constexpr int fit_repetitions = 5;
constexpr int check_repetitions = 3;
constexpr int warmups = 3;

}  // namespace

/// Fits measured = overhead + scale * spin by least squares over a range of spins, then checks
/// how close calibrated requests land.
compute_calibration cuda_kv_cache::calibrate_compute() {
  select_device();
  cudaStream_t s = compute_.get();
  auto* readback = reinterpret_cast<unsigned long long*>(check_readback_->get());
  launch_timer_probe(reinterpret_cast<unsigned long long*>(check_result_->get()), s);
  KVTIER_CUDA_CHECK(cudaMemcpyAsync(readback, check_result_->get(), sizeof *readback,
                                    cudaMemcpyDeviceToHost, s));
  KVTIER_CUDA_CHECK(cudaStreamSynchronize(s));
  compute_calibration c;
  c.timer_tick_ns = static_cast<double>(*readback);
  cudaEvent_t a = events_.take();
  cudaEvent_t b = events_.take();
  auto measure = [&](uint64_t spin) {
    KVTIER_CUDA_CHECK(cudaEventRecord(a, s));
    launch_busy(spin, s);
    KVTIER_CUDA_CHECK(cudaEventRecord(b, s));
    KVTIER_CUDA_CHECK(cudaEventSynchronize(b));
    return elapsed_ns(a, b);
  };
  for (int i = 0; i < warmups; ++i)
    measure(probe_ns[2]);
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (uint64_t spin : probe_ns) {
    for (int i = 0; i < fit_repetitions; ++i) {
      double x = static_cast<double>(spin);
      double y = measure(spin);
      n += 1;
      sx += x;
      sy += y;
      sxx += x * x;
      sxy += x * y;
    }
  }
  c.scale = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  c.overhead_ns = (sy - c.scale * sx) / n;
  KVTIER_ASSERT(c.scale > 0);
  calibration_ = c;
  for (uint64_t asked : probe_ns) {
    if (asked < accuracy_floor_ns)
      continue;
    std::vector<double> got;
    for (int i = 0; i < check_repetitions; ++i)
      got.push_back(measure(spin_for(asked)));
    std::sort(got.begin(), got.end());
    double err = std::abs(got[got.size() / 2] - static_cast<double>(asked)) / asked;
    c.max_error = std::max(c.max_error, err);
  }
  events_.give_back(a);
  events_.give_back(b);
  calibration_ = c;
  return c;
}

uint64_t cuda_kv_cache::spin_for(uint64_t asked_ns) const {
  double spin = (static_cast<double>(asked_ns) - calibration_.overhead_ns) / calibration_.scale;
  return spin > 0 ? static_cast<uint64_t>(std::llround(spin)) : 0;
}

op_id cuda_kv_cache::submit_compute(const std::vector<uint64_t>& layer_ns, op_id after_h2d) {
  select_device();
  const op_record* h2d = nullptr;
  if (after_h2d != 0) {
    h2d = &find(after_h2d);
    if (h2d->kind != op_kind::h2d)
      throw gpu_error("compute can wait only for an H2D op, and op " + std::to_string(after_h2d)
                      + " is not one");
    if (h2d->layer_events.size() != layer_ns.size())
      throw gpu_error("compute of " + std::to_string(layer_ns.size())
                      + " layers cannot follow H2D op " + std::to_string(after_h2d) + " of "
                      + std::to_string(h2d->layer_events.size()) + " layers");
  }
  uint32_t layers = static_cast<uint32_t>(layer_ns.size());
  op_id id = add_op(op_kind::compute, 0, layers, layers);
  op_record& rec = ops_.at(id);
  cudaStream_t s = compute_.get();
  KVTIER_CUDA_CHECK(cudaEventRecord(rec.start, s));
  for (uint32_t l = 0; l < layers; ++l) {
    if (h2d != nullptr)
      KVTIER_CUDA_CHECK(cudaStreamWaitEvent(s, h2d->layer_events[l], 0));
    KVTIER_CUDA_CHECK(cudaEventRecord(rec.begin_events[l], s));
    launch_busy(spin_for(layer_ns[l]), s);
    KVTIER_CUDA_CHECK(cudaEventRecord(rec.layer_events[l], s));
  }
  KVTIER_CUDA_CHECK(cudaEventRecord(rec.end, s));
  notify_after(rec, id, -1, rec.end, compute_notify_.get());
  close_notifications(rec, compute_notify_.get());
  return id;
}

}  // namespace kvtier::gpu::detail
