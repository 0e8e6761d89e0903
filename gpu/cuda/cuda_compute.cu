// Compute emulation: a forward pass as one busy kernel per layer on the compute stream. With an
// H2D op to follow, the stream waits for that op's layer event before each layer, so layer l
// runs as soon as its KV is in place, overlapping the transfer of later layers, and the time it
// waited is the stall that a real model would see.
//
//   ready_l --(wait for H2D layer l)--> begin_l --(busy kernel)--> done_l = ready_(l+1)

#include <algorithm>
#include <cmath>

#include "core/check.hpp"
#include "gpu/cuda/cuda_kv_cache.cuh"

namespace kvtier::gpu::detail {

namespace {

constexpr uint64_t probe_ns[] = {10'000, 20'000, 100'000, 500'000, 2'000'000};
/// Shorter requests are met to about the launch gap, not to a share of themselves.
constexpr uint64_t accuracy_floor_ns = 20'000;
constexpr int fit_repetitions = 5;
constexpr int check_repetitions = 3;
/// Long enough for the host to queue every probe behind it.
constexpr uint64_t hold_ns = 2'000'000;
constexpr uint64_t hold_per_probe_ns = 20'000;

}  // namespace

/// Runs the busy kernel once per spin, back to back behind a hold kernel, and returns each one's
/// time between its events. The layers of a forward pass run so: queued while the GPU is busy,
/// which keeps the host's launch latency out of the figures.
std::vector<double> cuda_kv_cache::time_busy(const std::vector<uint64_t>& spins) {
  cudaStream_t s = compute_.get();
  std::vector<cudaEvent_t> marks;
  for (size_t i = 0; i < 2 * spins.size(); ++i)
    marks.push_back(events_.take());
  launch_busy(hold_ns + hold_per_probe_ns * spins.size(), s);
  for (size_t i = 0; i < spins.size(); ++i) {
    KVTIER_CUDA_CHECK(cudaEventRecord(marks[2 * i], s));
    launch_busy(spins[i], s);
    KVTIER_CUDA_CHECK(cudaEventRecord(marks[2 * i + 1], s));
  }
  KVTIER_CUDA_CHECK(cudaEventSynchronize(marks.back()));
  std::vector<double> ns;
  for (size_t i = 0; i < spins.size(); ++i)
    ns.push_back(elapsed_ns(marks[2 * i], marks[2 * i + 1]));
  for (cudaEvent_t e : marks)
    events_.give_back(e);
  return ns;
}

/// Layers queued behind a hold kernel, each first waiting for its own event of the H2D kernel
/// stream, as a pass after a swap-in waits: the median gap from one layer's end to the next
/// one's start is what each waited layer loses. `pending`: the events are recorded behind a
/// kernel half as long as the hold, so they pass before the layers run but are still pending
/// when the waits are submitted, as a swap-in's are when a replay submits its step; otherwise
/// they have passed before the waits are submitted.
double cuda_kv_cache::time_layer_wait(bool pending) {
  constexpr int layers = 33;
  constexpr uint64_t layer_ns = 50'000;
  cudaStream_t s = compute_.get();
  cudaStream_t copy = h2d_.kernel.get();
  std::vector<cudaEvent_t> copied;
  if (pending)
    launch_busy(hold_ns / 2, copy);
  for (int i = 0; i < layers; ++i) {
    copied.push_back(events_.take());
    KVTIER_CUDA_CHECK(cudaEventRecord(copied.back(), copy));
  }
  if (!pending)
    KVTIER_CUDA_CHECK(cudaEventSynchronize(copied.back()));
  std::vector<cudaEvent_t> marks;
  for (int i = 0; i < 2 * layers; ++i)
    marks.push_back(events_.take());
  launch_busy(hold_ns, s);
  for (int i = 0; i < layers; ++i) {
    KVTIER_CUDA_CHECK(cudaStreamWaitEvent(s, copied[i], 0));
    KVTIER_CUDA_CHECK(cudaEventRecord(marks[2 * i], s));
    launch_busy(spin_for(layer_ns), s);
    KVTIER_CUDA_CHECK(cudaEventRecord(marks[2 * i + 1], s));
  }
  KVTIER_CUDA_CHECK(cudaEventSynchronize(marks.back()));
  std::vector<double> gaps;
  for (int i = 1; i < layers; ++i)
    gaps.push_back(elapsed_ns(marks[2 * i - 1], marks[2 * i]));
  for (cudaEvent_t e : marks)
    events_.give_back(e);
  for (cudaEvent_t e : copied)
    events_.give_back(e);
  std::sort(gaps.begin(), gaps.end());
  return gaps[gaps.size() / 2];
}

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
  std::vector<uint64_t> spins;
  for (uint64_t spin : probe_ns)
    spins.insert(spins.end(), fit_repetitions, spin);
  std::vector<double> took = time_busy(spins);
  double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (size_t i = 0; i < spins.size(); ++i) {
    double x = static_cast<double>(spins[i]);
    n += 1;
    sx += x;
    sy += took[i];
    sxx += x * x;
    sxy += x * took[i];
  }
  c.scale = (n * sxy - sx * sy) / (n * sxx - sx * sx);
  c.overhead_ns = (sy - c.scale * sx) / n;
  KVTIER_ASSERT(c.scale > 0);
  calibration_ = c;
  std::vector<uint64_t> asked;
  spins.clear();
  for (uint64_t a : probe_ns) {
    if (a < accuracy_floor_ns)
      continue;
    asked.push_back(a);
    spins.insert(spins.end(), check_repetitions, spin_for(a));
  }
  took = time_busy(spins);
  for (size_t k = 0; k < asked.size(); ++k) {
    std::vector<double> got(took.begin() + k * check_repetitions,
                            took.begin() + (k + 1) * check_repetitions);
    std::sort(got.begin(), got.end());
    double err = std::abs(got[got.size() / 2] - static_cast<double>(asked[k])) / asked[k];
    c.max_error = std::max(c.max_error, err);
  }
  calibration_ = c;
  c.layer_wait_ns = time_layer_wait(true);
  c.layer_wait_passed_ns = time_layer_wait(false);
  calibration_ = c;
  return c;
}

uint64_t cuda_kv_cache::spin_for(uint64_t asked_ns) const {
  double spin = (static_cast<double>(asked_ns) - calibration_.overhead_ns) / calibration_.scale;
  return spin > 0 ? static_cast<uint64_t>(std::llround(spin)) : 0;
}

op_id cuda_kv_cache::submit_compute(const std::vector<uint64_t>& layer_ns, op_id after_h2d,
                                    uint64_t lead_ns) {
  select_device();
  std::vector<cudaEvent_t> waits;
  if (after_h2d != 0) {
    const op_record& h2d = find(after_h2d);
    if (h2d.kind != op_kind::h2d)
      throw gpu_error("compute can wait only for an H2D op, and op " + std::to_string(after_h2d)
                      + " is not one");
    if (h2d.layer_events.size() != layer_ns.size())
      throw gpu_error("compute of " + std::to_string(layer_ns.size())
                      + " layers cannot follow H2D op " + std::to_string(after_h2d) + " of "
                      + std::to_string(h2d.layer_events.size()) + " layers");
    waits = h2d.layer_events;
  }
  return run_compute(layer_ns, waits, lead_ns);
}

op_id cuda_kv_cache::submit_compute_after_events(const std::vector<uint64_t>& layer_ns,
                                                 const std::vector<uint32_t>& layer_events,
                                                 uint64_t lead_ns) {
  select_device();
  if (layer_events.size() != layer_ns.size())
    throw gpu_error("compute of " + std::to_string(layer_ns.size()) + " layers needs one IPC "
                    "event per layer, got " + std::to_string(layer_events.size()));
  std::vector<cudaEvent_t> waits;
  for (uint32_t e : layer_events) {
    if (e >= ipc_events_.size())
      throw gpu_error("IPC event " + std::to_string(e) + " does not exist (there are "
                      + std::to_string(ipc_events_.size()) + ")");
    waits.push_back(ipc_events_[e]);
  }
  return run_compute(layer_ns, waits, lead_ns);
}

op_id cuda_kv_cache::run_compute(const std::vector<uint64_t>& layer_ns,
                                 const std::vector<cudaEvent_t>& waits, uint64_t lead_ns) {
  uint32_t layers = static_cast<uint32_t>(layer_ns.size());
  op_id id = add_op(op_kind::compute, 0, layers, layers);
  op_record& rec = ops_.at(id);
  cudaStream_t s = compute_.get();
  KVTIER_CUDA_CHECK(cudaEventRecord(rec.start, s));
  if (lead_ns > 0) {
    rec.lead_end = events_.take();
    launch_busy(spin_for(lead_ns), s);
    KVTIER_CUDA_CHECK(cudaEventRecord(rec.lead_end, s));
  }
  for (uint32_t l = 0; l < layers; ++l) {
    if (!waits.empty())
      KVTIER_CUDA_CHECK(cudaStreamWaitEvent(s, waits[l], 0));
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
