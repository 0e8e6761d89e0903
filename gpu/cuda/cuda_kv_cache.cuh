#pragma once

// The CUDA implementation of kv_cache. Split by concern over several files:
//   cuda_kv_cache.cu   construction, op records, completion and timing queries
//   cuda_transfers.cu  the four transfer methods and the bulk reference copy
//   cuda_compute.cu    the emulated forward pass and its calibration
//   cuda_verify.cu     pattern fill, poison and check on the device
//
// Every op has a start and an end event. A direction's op runs on its lane: the copy stream
// issues DMA work, the kernel stream runs the staging and zero-copy kernels. Where a layer's or
// the op's work ends on the copy stream, that stream is joined into the kernel stream, so one
// event on the kernel stream covers both. The copy stream then waits for the op's end, which
// keeps the ops of one direction strictly one after another.

#include <cuda_runtime.h>

#include <memory>
#include <unordered_map>
#include <vector>

#include "gpu/cuda/cuda_resources.cuh"
#include "gpu/cuda/device_tensors.cuh"
#include "gpu/cuda/kernels.cuh"
#include "gpu/kv_cache.hpp"
#include "gpu/staging_plan.hpp"

namespace kvtier::gpu::detail {

/// What a host function needs to call the completion callback; its op owns it until release().
struct callback_call {
  const completion_callback* callback = nullptr;
  op_id id = 0;
  int layer = -1;
};

class cuda_kv_cache final : public kv_cache {
 public:
  cuda_kv_cache(const kv_cache_config& config, const device_info& info);
  ~cuda_kv_cache() override;

  const kv_layout& layout() const override { return layout_; }
  const device_info& device() const override { return info_; }
  startup_timing startup() const override { return startup_; }

  op_id submit_h2d(const std::vector<block_pair>& pairs, transfer_method method) override;
  op_id submit_d2h(const std::vector<block_pair>& pairs, transfer_method method) override;
  op_id submit_bulk(transfer_direction d, uint64_t bytes, uint64_t device_offset,
                    uint64_t host_offset) override;

  compute_calibration calibrate_compute() override;
  op_id submit_compute(const std::vector<uint64_t>& layer_ns, op_id after_h2d,
                       uint64_t lead_ns) override;

  bool layer_done(op_id id, int layer) override;
  void wait(op_id id, int layer) override;
  transfer_timing transfer_time(op_id id) override;
  compute_timing compute_time(op_id id) override;
  double start_offset_ns(op_id from, op_id to) override;
  void release(op_id id) override;
  void synchronize() override;

  std::vector<layer_tensor_handle> export_layers() override;
  std::vector<ipc_handle> create_ipc_events(uint32_t count) override;
  void open_ipc_events(const std::vector<ipc_handle>& handles) override;
  uint32_t signal_ipc_event(op_id h2d, uint32_t layer, uint32_t event) override;
  op_id submit_compute_after_events(const std::vector<uint64_t>& layer_ns,
                                    const std::vector<uint32_t>& layer_events,
                                    uint64_t lead_ns) override;

  std::byte* host_block(uint32_t block) override;
  void fill_device_blocks(const std::vector<block_pattern>& blocks) override;
  void poison_device_blocks(const std::vector<uint32_t>& blocks, uint8_t byte) override;
  std::optional<verify_mismatch> check_device_blocks(
      const std::vector<block_pattern>& blocks) override;

 private:
  enum class op_kind : uint8_t { h2d, d2h, bulk, compute };

  struct op_record {
    op_kind kind = op_kind::h2d;
    uint64_t bytes = 0;
    cudaEvent_t start = nullptr;
    cudaEvent_t end = nullptr;
    std::vector<cudaEvent_t> layer_events;  ///< H2D: layer in place; compute: layer's kernel done
    std::vector<cudaEvent_t> begin_events;  ///< compute: layer's kernel started
    cudaEvent_t notified = nullptr;         ///< after the op's last host function, if any
    cudaEvent_t lead_end = nullptr;         ///< compute with a lead: the lead kernel done
    std::vector<std::unique_ptr<callback_call>> calls;
  };

  /// The streams and staging slots of one direction.
  struct lane {
    cuda_stream copy;
    cuda_stream kernel;
    cuda_stream notify;
    std::unique_ptr<device_buffer> slots;
    std::vector<cudaEvent_t> slot_ready;  ///< the slot holds data for its consumer
    std::vector<cudaEvent_t> slot_free;   ///< the slot's consumer is done with it
    cudaEvent_t join = nullptr;           ///< scratch: the copy stream's tail
  };

  // -- op records (cuda_kv_cache.cu) ----------------------------------------------------------

  void select_device() const;
  op_id add_op(op_kind kind, uint64_t bytes, uint32_t layer_events, uint32_t begin_events);
  op_record& find(op_id id);
  cudaEvent_t event_of(op_record& rec, op_id id, int layer);
  /// Lets `notify` call the callback for (id, layer) once `event` has completed.
  void notify_after(op_record& rec, op_id id, int layer, cudaEvent_t event, cudaStream_t notify);
  void close_notifications(op_record& rec, cudaStream_t notify);
  double elapsed_ns(cudaEvent_t from, cudaEvent_t to) const;
  tensor_view tensors() const;

  // -- compute (cuda_compute.cu) --------------------------------------------------------------

  /// The busy kernel's spin that, by the calibration, takes `asked_ns`.
  uint64_t spin_for(uint64_t asked_ns) const;
  /// The compute op: lead, then per layer a wait for waits[l] (if any) and the busy kernel.
  op_id run_compute(const std::vector<uint64_t>& layer_ns, const std::vector<cudaEvent_t>& waits,
                    uint64_t lead_ns);
  std::vector<double> time_busy(const std::vector<uint64_t>& spins);
  double time_layer_wait(bool pending);

  // -- transfers (cuda_transfers.cu) ----------------------------------------------------------

  op_id submit_transfer(const std::vector<block_pair>& pairs, transfer_method method,
                        transfer_direction d);
  void begin_op(op_record& rec, lane& ln, bool after_compute);
  /// Joins the copy stream into the kernel stream and records `event` there.
  void mark(lane& ln, cudaEvent_t event);
  void finish_op(op_record& rec, op_id id, lane& ln);
  void run_per_chunk(const std::vector<block_pair>& pairs, transfer_direction d, op_record& rec,
                     lane& ln);
  void run_batched(const std::vector<block_pair>& pairs, transfer_direction d, op_record& rec,
                   lane& ln);
  void run_staging(const std::vector<block_pair>& pairs, transfer_direction d, op_record& rec,
                   lane& ln);
  void run_zero_copy(const std::vector<block_pair>& pairs, transfer_direction d, op_record& rec,
                     lane& ln);
  void run_slot(const staging_plan& plan, const staged_slot& slot, transfer_direction d,
                lane& ln);
  /// Issues `copies` between the host pool and `other` on `stream`: strided ones one by one,
  /// single rows together in one batch.
  /// `other` null: the device side is the tensors (other_offset in the arena layout).
  void copy_strided(const std::vector<strided_copy>& copies, uint8_t* other, transfer_direction d,
                    cudaStream_t stream);

  // -- members --------------------------------------------------------------------------------

  kv_cache_config config_;
  device_info info_;
  kv_layout layout_;
  staging_limits staging_;
  event_pool events_;  // declared before the lanes: lanes hold its events
  std::unique_ptr<device_tensors> tensors_;
  std::unique_ptr<pinned_buffer> host_;
  lane h2d_;
  lane d2h_;
  cuda_stream compute_;
  cuda_stream compute_notify_;
  cudaEvent_t compute_mark_ = nullptr;  ///< scratch: the compute stream's tail
  std::unique_ptr<device_buffer> check_result_;
  std::unique_ptr<pinned_buffer> check_readback_;
  compute_calibration calibration_;
  startup_timing startup_;
  std::unordered_map<op_id, op_record> ops_;
  std::vector<cudaEvent_t> ipc_events_;  ///< shared with another process (created or opened)
  bool ipc_events_owned_ = false;         ///< created here: destroyed here
  std::vector<uint32_t> ipc_records_;     ///< records of each IPC event so far
  cuda_stream signal_;                    ///< records IPC events after H2D layers
  op_id next_id_ = 1;
};

}  // namespace kvtier::gpu::detail
