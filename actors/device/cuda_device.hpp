#pragma once

// The GPU as the actors share it: the CUDA KV cache (gpu/kv_cache.hpp) carrying the transfer
// engine's device and host copies (cuda_copies.hpp), and the step compute emulated on the GPU
// (gpu_compute.hpp). Two actors call it from their own threads, so every call takes its lock.
//
// A step's compute waits, layer by layer, for its swap-in. The compute may be asked for before
// the engine has submitted that swap-in (it still waits for a D2H): it is parked here and
// submitted right after the swap-in. Swap-in ids grow, so an id above every id the engine has
// registered is one still to come, and an id at or below it that is no longer held was complete
// and released. A swap-in is released once it is complete and its compute has been submitted.
//
// Completions arrive on a CUDA thread; each goes to the sink of the actor that submitted its op.
// With --verify the transfer engine checks the blocks through cuda_copies and verified_copies
// (actors/transfer_engine/), which read and write them with the calls below.

#include <cstdint>
#include <functional>
#include <condition_variable>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "actors/device/compute_device.hpp"
#include "actors/messages.hpp"
#include "gpu/kv_cache.hpp"

namespace kvtier {

struct cuda_device_options {
  model_shape shape;        ///< the KV one rank caches (replay_config::model)
  uint32_t block_size = 0;  ///< tokens per block
  uint32_t device_blocks = 0;
  uint32_t host_blocks = 0;
  /// --verify: the deployment checks every block wherever it lands (its transfer engine's
  /// copies are verified_copies, see use_cuda_copies); the device itself checks nothing.
  bool verify = false;
  /// The device tensors are an engine's, given later to attach() (kvtier serve --backend
  /// cuda): nothing is allocated until then.
  bool attach_later = false;
};

/// An engine's tensors and IPC events as its hello gives them (docs/protocol.md, version 2).
struct engine_tensors {
  std::vector<gpu::layer_tensor_handle> layers;  ///< one per layer
  std::vector<gpu::ipc_handle> events;           ///< event_slots x layers, slot-major
  uint32_t event_slots = 0;
};

/// A swap-in into an attached engine's tensors was submitted and its slot's events recorded.
struct swap_in_signal {
  uint64_t transfer = 0;
  uint32_t slot = 0;
  std::vector<gpu::block_pattern> blocks;  ///< device block and the hash it receives
};

/// bench_swap(): H2D of host blocks into the attached tensors, timed on the device.
struct swap_bench_result {
  uint64_t bytes = 0;        ///< per repeat
  std::vector<double> gbps;  ///< per repeat
  uint32_t slot = 0;         ///< the events recorded for the last repeat
};

class cuda_device : public compute_device {
 public:
  explicit cuda_device(const cuda_device_options& options);

  /// Where completions go: copies to the transfer engine, computes to the compute actor.
  void set_sinks(sink copies, sink computes);
  void set_compute_sink(sink computes) override;

  // -- an engine's tensors (attach_later) --
  /// Opens the engine's tensors and IPC events and makes the cache on them; throws gpu_error
  /// naming what failed. Once.
  void attach(const engine_tensors& tensors);
  bool attached() const;
  /// Called (on the transfer engine's thread) for every swap-in once it is submitted and its
  /// slot's IPC events are recorded behind its layers.
  void set_swap_in_hook(std::function<void(swap_in_signal)> hook);
  /// Fills host block i with the pattern of targets[i].hash and loads it into device block
  /// targets[i].block, `repeats` times, recording the next slot's IPC events behind the last
  /// load. Only while no other copy runs (the server checks).
  swap_bench_result bench_swap(const std::vector<gpu::block_pattern>& targets, uint32_t repeats);

  std::string device_name() const;
  /// What creating the cache took (nothing before an engine attached).
  gpu::startup_timing startup() const;
  uint64_t block_bytes() const {
    return gpu::kv_layout{options_.shape, options_.block_size}.host_block_bytes();
  }

  // -- copies (the transfer engine) --
  /// A swap-in with this transfer id will be submitted (computes asking for it wait).
  void expect_swap_in(uint64_t transfer);
  /// Starts a swap-in (layer by layer) or a D2H; returns the op.
  uint64_t submit_copy(const transfer& t);
  /// Marks the device blocks a step produced with their patterns (ordered before later D2Hs).
  void fill(const transfer& t);
  /// Whether the device blocks of `t` hold their patterns (empty) or what is wrong.
  std::string check_device_blocks(const transfer& t);
  /// Whether host block `b.host_block` holds the pattern of `b.hash` (empty) or what is wrong.
  std::string check_host_block(const block_move& b);
  /// A copy of a host block's bytes (a put to a byte-carrying storage pool; --verify keeps
  /// them when storage is modelled), and a write of such bytes back into a host block.
  std::vector<uint8_t> host_payload(uint32_t host_block);
  void write_host_block(uint32_t host_block, const std::vector<uint8_t>& bytes);
  /// A get from a byte-carrying pool reads into the host block itself. The host block belongs
  /// to that load until it ends, so the storage backend's thread writes it without this lock.
  payload_destination host_destination(uint32_t host_block);
  /// The copy op completed: its measured duration; the op is released when nothing waits on it.
  int64_t copy_completed(uint64_t op);

  // -- step compute (the compute actor) --
  /// Runs a step: `lead_ns` first, then layer l after layer l of swap-in `after_swap_in` (0:
  /// none). Returns the op, or 0 when it is parked until that swap-in is submitted (its
  /// completion comes all the same).
  uint64_t submit_compute(uint64_t step, int64_t lead_ns, std::vector<int64_t> layer_ns,
                          uint64_t after_swap_in) override;
  /// The compute op completed: the step it ran and the time its layers waited for data.
  std::pair<uint64_t, int64_t> compute_completed(uint64_t op) override;

 private:
  struct parked_compute {
    uint64_t step;
    int64_t lead_ns;
    std::vector<int64_t> layer_ns;
  };
  struct swap_in_op {
    uint64_t op = 0;      // 0: expected, not submitted yet
    bool completed = false;
    bool referenced = false;
    std::vector<parked_compute> parked;
  };

  void on_complete(uint64_t op, int layer);
  uint64_t submit_compute_locked(uint64_t step, int64_t lead_ns, const std::vector<int64_t>& ns,
                                 uint64_t after_op);
  void release_if_done_locked(uint64_t transfer);

  gpu::kv_cache_config cache_config();

  cuda_device_options options_;
  std::unique_ptr<gpu::kv_cache> cache_;
  uint32_t event_slots_ = 0;  ///< attached: the engine's IPC event slots
  uint32_t next_slot_ = 0;
  std::function<void(swap_in_signal)> swap_in_hook_;
  std::set<uint64_t> bench_ops_;  ///< bench_swap's ops until their completion is seen
  std::condition_variable bench_done_;
  std::mutex mutex_;
  sink copies_, computes_;
  std::map<uint64_t, swap_in_op> swap_ins_;            // by transfer id
  absl::flat_hash_map<uint64_t, uint64_t> copy_ops_;   // op -> transfer id (swap-ins), or 0
  absl::flat_hash_map<uint64_t, uint64_t> compute_ops_;  // op -> step
  uint64_t last_expected_ = 0;
};

}  // namespace kvtier
