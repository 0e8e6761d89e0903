#pragma once

// The CPU real mode's kv_cache (shm_kv_cache.hpp): the engine's KV tensors in POSIX shared
// memory, copied by two threads (host to engine, engine to host), as the CUDA backend's streams
// would. Internal to gpu/shm: make_shm_kv_cache is the way in.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "gpu/kv_cache.hpp"
#include "gpu/shm/shm_kv_cache.hpp"
#include "gpu/shm/shm_segment.hpp"

namespace kvtier::gpu {

class shm_kv_cache final : public kv_cache {
  // What each copy thread runs.
  using clock = std::chrono::steady_clock;

  enum class op_kind : uint8_t { h2d, d2h, fill, poison };

  struct op_record {
    op_kind kind = op_kind::h2d;
    std::vector<block_pair> pairs;
    std::vector<block_pattern> patterns;  ///< fill; poison: the blocks
    uint8_t poison = 0;
    uint32_t fence = 0;                   ///< d2h: the engine's forward to wait for (0: none)
    bool notify = true;                   ///< h2d, d2h: call the completion callback
    bool keep = true;                     ///< false: forgotten once done (fill: nobody waits)
    uint32_t layers_done = 0;
    bool done = false;
    /// h2d: per layer, the signal words to store once it is in place (word, record)
    std::vector<std::vector<std::pair<uint32_t, uint32_t>>> signals;
    clock::time_point queued, start, end;
    std::vector<clock::time_point> layer_end;
  };

 public:
  explicit shm_kv_cache(const kv_cache_config& config);
  ~shm_kv_cache() override;

  const kv_layout& layout() const override { return layout_; }
  const device_info& device() const override { return info_; }
  startup_timing startup() const override { return startup_; }

  op_id submit_h2d(const std::vector<block_pair>& pairs, transfer_method) override {
    return submit(op_kind::h2d, pairs, transfer_direction::h2d);
  }
  op_id submit_d2h(const std::vector<block_pair>& pairs, transfer_method) override {
    return submit(op_kind::d2h, pairs, transfer_direction::d2h);
  }
  op_id submit_bulk(transfer_direction, uint64_t, uint64_t, uint64_t) override {
    throw gpu_error("the shared-memory backend has no bulk copy (it copies engine blocks)");
  }

  compute_calibration calibrate_compute() override { throw no_compute(); }
  op_id submit_compute(const std::vector<uint64_t>&, op_id, uint64_t) override {
    throw no_compute();
  }
  op_id submit_compute_after_events(const std::vector<uint64_t>&, const std::vector<uint32_t>&,
                                    uint64_t) override {
    throw no_compute();
  }
  compute_timing compute_time(op_id) override { throw no_compute(); }

  bool layer_done(op_id id, int layer) override;
  void wait(op_id id, int layer) override;
  transfer_timing transfer_time(op_id id) override;
  double start_offset_ns(op_id from, op_id to) override;
  void release(op_id id) override;
  void synchronize() override;

  std::vector<layer_tensor_handle> export_layers() override {
    throw gpu_error("the shared-memory backend attaches an engine's tensors; it exports none");
  }
  std::vector<ipc_handle> create_ipc_events(uint32_t) override {
    throw gpu_error("the shared-memory backend signals through the engine's signal segment");
  }
  void open_ipc_events(const std::vector<ipc_handle>&) override {
    throw gpu_error("the shared-memory backend signals through the engine's signal segment");
  }
  uint32_t signal_ipc_event(op_id h2d, uint32_t layer, uint32_t event) override;
  void fence_reads(uint32_t step) override;

  std::byte* host_block(uint32_t block) override;
  void fill_device_blocks(const std::vector<block_pattern>& blocks) override;
  void poison_device_blocks(const std::vector<uint32_t>& blocks, uint8_t byte) override;
  std::optional<verify_mismatch> check_device_blocks(
      const std::vector<block_pattern>& blocks) override;

 private:
  struct lane {
    std::deque<op_id> queue;
    std::condition_variable wake;
    std::thread thread;
  };

  static gpu_error no_compute() {
    return gpu_error("the shared-memory backend runs no compute: the engine computes");
  }
  uint8_t* chunk(uint32_t block, uint32_t layer, kv_half half) const {
    return layers_[layer] + layout_.layer_offset(block, half);
  }
  uint32_t* signal_word(uint32_t event) const {
    return reinterpret_cast<uint32_t*>(signals_->base() + shm_signals_offset) + event;
  }
  uint32_t* forward_word() const {
    return reinterpret_cast<uint32_t*>(signals_->base() + shm_forward_offset);
  }
  void map_layers(const kv_cache_config& config);
  op_id submit(op_kind kind, const std::vector<block_pair>& pairs, transfer_direction d);
  op_id enqueue(op_record rec);
  void run(lane& ln);
  void execute(op_id id, op_record& rec);
  void copy_h2d(op_id id, op_record& rec);
  void copy_d2h(op_record& rec);
  void wait_for_forward(uint32_t fence);
  void patterns(op_record& rec);
  op_record& find(op_id id);

  kv_cache_config config_;
  kv_layout layout_;
  device_info info_;
  startup_timing startup_;
  std::vector<std::unique_ptr<mapped_segment>> segments_;
  std::unique_ptr<mapped_segment> signals_;
  std::vector<uint8_t*> layers_;
  std::byte* host_ = nullptr;
  std::vector<uint32_t> records_;  ///< per signal word: records so far

  std::mutex mutex_;
  std::condition_variable done_;
  std::unordered_map<op_id, op_record> ops_;
  op_id next_id_ = 1;
  uint32_t fence_ = 0;
  bool stopping_ = false;
  lane h2d_, d2h_;
};

}  // namespace kvtier::gpu
