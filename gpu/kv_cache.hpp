#pragma once

// A real KV cache on a CUDA device plus its pinned host tier, and the block transfers between
// them: the backend that kvtier's transfer engine drives in emulation mode. Plain C++ only; the
// CUDA types stay inside gpu/cuda/.
//
// Work runs on streams, and ops of one kind complete in submission order:
//
//   h2d       copy + kernel stream   layer by layer, one event per layer
//   d2h       copy + kernel stream   all layers at once, one event at the end; first waits for
//                                    the compute work submitted before it (the block's producer)
//   compute   one stream             per layer: wait for that layer's H2D event, then busy-wait
//   notify    one stream per kind    host functions that call the completion callback
//
// H2D and D2H overlap each other and compute. The caller keeps them off each other's blocks: a
// block must not be the destination of one op while another op in flight reads or writes it
// (the cache model's pins say when that is over).
//
// Op ids count up from 1 across all kinds. An op's events and timings live until release(id).
// Not thread-safe: call from one thread at a time (any thread; each call selects the device).

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpu/startup_progress.hpp"
#include "gpu/block_runs.hpp"
#include "gpu/device_info.hpp"
#include "gpu/gpu_error.hpp"
#include "gpu/kv_layout.hpp"
#include "gpu/verify_pattern.hpp"

namespace kvtier::gpu {

using op_id = uint64_t;

/// Called once per completed H2D layer (layer >= 0) and once per completed op (layer == -1),
/// in order per kind. It runs on a CUDA-owned thread (cudaLaunchHostFunc): it must return soon
/// and must not call CUDA or this cache; posting a message is the intended use.
using completion_callback = std::function<void(op_id id, int layer)>;

enum class transfer_method : uint8_t {
  automatic,  ///< default_method() of the direction
  per_chunk,  ///< one cudaMemcpyAsync per (block, layer, K|V): the classic swap_blocks baseline
  batched,    ///< the same chunks through cudaMemcpyBatchAsync, one call per layer
  staging,    ///< gather/scatter kernels, bounded staging slots, long copies (staging_plan.hpp)
  zero_copy,  ///< a kernel of few CTAs reading/writing mapped host memory directly
};

const char* to_string(transfer_method m);
std::optional<transfer_method> parse_transfer_method(std::string_view name);

/// What `automatic` means: staging in both directions. It reaches 98-99% of a bulk copy at 16-
/// and 64-token blocks, and it keeps both directions on the copy engines, which is what lets
/// them run at full speed together (a zero-copy kernel in one direction stalls a DMA in the
/// other); measured figures in docs/gpu.md.
transfer_method default_method(transfer_direction d);

/// The bytes of a CUDA IPC handle (cudaIpcMemHandle_t and cudaIpcEventHandle_t are both 64 bytes,
/// CUDA_IPC_HANDLE_SIZE): opaque outside gpu/cuda/.
inline constexpr size_t ipc_handle_bytes = 64;
using ipc_handle = std::array<uint8_t, ipc_handle_bytes>;

/// One layer's device tensor as another process exports it: K at `offset` bytes into the
/// allocation the handle names, V right after it, each [device_blocks][chunk] (kv_layout.hpp).
struct layer_tensor_handle {
  ipc_handle handle{};
  uint64_t offset = 0;
};

/// Where the device tensors come from: the seam between a cache that owns its KV memory and one
/// that runs its copies on an engine's.
enum class device_memory : uint8_t {
  own_arena,     ///< one allocation holding every tensor (kv_layout.hpp)
  own_exported,  ///< one allocation per layer (K then V), exportable with export_layers()
  attached,      ///< another process's layers, opened from `attach` (cudaIpcOpenMemHandle)
};

struct kv_cache_config {
  model_shape shape = llama3_8b_kv();  ///< the KV one rank caches (core/model_shape.hpp)
  uint32_t block_size = 16;            ///< tokens per block
  device_memory memory = device_memory::own_arena;
  std::vector<layer_tensor_handle> attach;  ///< attached: one per layer
  uint32_t device_blocks = 0;
  uint32_t host_blocks = 0;
  int device_ordinal = 0;
  uint64_t staging_slot_bytes = 16ull << 20;  ///< per slot, raised to one slice if smaller
  uint32_t staging_slots = 4;                 ///< per direction
  /// Staging copies runs of blocks contiguous on both sides directly (no kernel, no SM time)
  /// once a run's bytes per tensor reach this; 0: always stage. Measured on an H200, direct
  /// strided copies move fewer GB/s than staging, hence the high default.
  uint64_t direct_min_bytes = 8ull << 20;
  uint32_t zero_copy_ctas = 8;
  bool calibrate_compute = true;  ///< run calibrate_compute() on creation
  completion_callback on_complete;
  /// Start-up lines (what is allocated and pinned, and how long it took); none when empty.
  progress_sink progress;
};

/// A transfer's device-side times (CUDA events), from its start: the moment its streams reached
/// it, after the earlier ops of its kind.
struct transfer_timing {
  uint64_t bytes = 0;
  double total_ns = 0;
  std::vector<double> layer_done_ns;  ///< H2D only: start to layer l in place
};

/// An emulated forward pass's times, from its start. A layer whose kernel was queued behind
/// other work takes what was asked; the first layer of a pass submitted to an idle stream also
/// carries the host's launch latency (a few us).
struct compute_timing {
  double total_ns = 0;
  std::vector<double> begin_ns;  ///< start to layer l's kernel starting
  std::vector<double> busy_ns;   ///< layer l's kernel
  std::vector<double> stall_ns;  ///< layer l ready to run (the lead, or layer l-1, done) but
                                 ///< waiting for its H2D layer
  double stall_total_ns = 0;
};

/// The busy kernel measured back to back, as a pass's layers run: a kernel asked to spin s ns
/// takes overhead_ns + scale * s. submit_compute() inverts this so that a layer takes the
/// duration asked for.
struct compute_calibration {
  double overhead_ns = 0;
  double scale = 1;
  double timer_tick_ns = 0;  ///< resolution of the device's global timer
  double max_error = 0;      ///< worst |measured - asked| / asked, calibrated, asked >= 20 us
  /// A layer's wait on its copy event, as a pass after a swap-in waits for each layer: the gap
  /// between the layer before and this one when the event has passed by the time the layer
  /// runs, but was still pending when the wait was submitted, as a swap-in's events are when a
  /// replay submits the step's compute (the stall compute_time() reports even when the data is
  /// in place; median). What the model charges (links.h2d_layer_wait_us).
  double layer_wait_ns = 0;
  /// The same wait on an event already complete when the wait is submitted (the driver may
  /// then leave the wait out): what earlier calibrations measured; printed for comparison.
  double layer_wait_passed_ns = 0;
};

/// A device block and the hash whose pattern it holds (or should hold).
struct block_pattern {
  uint32_t block = 0;
  uint64_t hash = 0;
};

class kv_cache {
 public:
  virtual ~kv_cache() = default;

  // -- observers ------------------------------------------------------------------------------

  virtual const kv_layout& layout() const = 0;
  virtual const device_info& device() const = 0;
  /// What creating the cache took, phase by phase.
  virtual startup_timing startup() const { return {}; }

  // -- transfers: return at once; check_pairs() failures throw before anything is queued -----

  /// Loads host blocks into device blocks layer by layer; each layer completes on its own.
  virtual op_id submit_h2d(const std::vector<block_pair>& pairs,
                           transfer_method method = transfer_method::automatic) = 0;
  /// Stores device blocks into host blocks, all layers at once.
  virtual op_id submit_d2h(const std::vector<block_pair>& pairs,
                           transfer_method method = transfer_method::automatic) = 0;
  /// One contiguous cudaMemcpyAsync of `bytes` between the device arena and the host pool at the
  /// given offsets: the link's reference speed. It overwrites whatever blocks lie there.
  virtual op_id submit_bulk(transfer_direction d, uint64_t bytes, uint64_t device_offset = 0,
                            uint64_t host_offset = 0) = 0;

  // -- compute emulation ----------------------------------------------------------------------

  /// Measures the busy kernel and applies the result to later submit_compute() calls.
  virtual compute_calibration calibrate_compute() = 0;
  /// Emulates a forward pass: first a kernel busy for `lead_ns` that waits for nothing (work
  /// before the first layer: scheduling, embedding), then per layer a kernel busy for
  /// layer_ns[l]. With `after_h2d` (an H2D op with one entry per layer), layer l starts only
  /// once that op's layer l is in place.
  virtual op_id submit_compute(const std::vector<uint64_t>& layer_ns, op_id after_h2d = 0,
                               uint64_t lead_ns = 0) = 0;

  // -- completion -----------------------------------------------------------------------------

  /// Whether op `id` (layer == -1) or its layer (H2D and compute ops) has completed.
  virtual bool layer_done(op_id id, int layer = -1) = 0;
  /// Blocks until op `id` (layer == -1) or its layer has completed.
  virtual void wait(op_id id, int layer = -1) = 0;
  /// Times of a completed transfer (H2D, D2H or bulk).
  virtual transfer_timing transfer_time(op_id id) = 0;
  /// Times of a completed compute op.
  virtual compute_timing compute_time(op_id id) = 0;
  /// Device time from the start of op `from` to the start of op `to` (negative if `to` began
  /// first); with the timings above it places ops of different kinds on one time line.
  virtual double start_offset_ns(op_id from, op_id to) = 0;
  /// Waits for op `id` and its callbacks, then frees its events; the id becomes unknown.
  virtual void release(op_id id) = 0;
  /// Waits until every op submitted so far has completed.
  virtual void synchronize() = 0;

  // -- CUDA IPC: tensors and per-layer completion events shared with another process ----------

  /// own_exported: one handle per layer, for the process that will attach them.
  virtual std::vector<layer_tensor_handle> export_layers() = 0;
  /// Creates `count` interprocess events (cudaEventInterprocess | cudaEventDisableTiming), ids
  /// 0..count-1 of this cache, and returns their handles. Once per cache.
  virtual std::vector<ipc_handle> create_ipc_events(uint32_t count) = 0;
  /// Opens another process's interprocess events as ids 0..n-1 of this cache. Once per cache.
  virtual void open_ipc_events(const std::vector<ipc_handle>& handles) = 0;
  /// Records IPC event `event` once layer `layer` of H2D op `h2d` is in place. A process
  /// waiting on the event from now on waits for that layer (an IPC wait waits for the record
  /// that precedes the wait call).
  virtual void signal_ipc_event(op_id h2d, uint32_t layer, uint32_t event) = 0;
  /// submit_compute() with layer l waiting for IPC event layer_events[l] instead of an own H2D
  /// op (one entry per layer): the engine side of a swap-in another process runs.
  virtual op_id submit_compute_after_events(const std::vector<uint64_t>& layer_ns,
                                            const std::vector<uint32_t>& layer_events,
                                            uint64_t lead_ns = 0) = 0;

  // -- verification ---------------------------------------------------------------------------

  /// The pinned host block: host_block_bytes() of the shape, laid out as in kv_layout.hpp.
  virtual std::byte* host_block(uint32_t block) = 0;
  /// Fills device blocks with their patterns on the compute stream, as compute produces KV.
  virtual void fill_device_blocks(const std::vector<block_pattern>& blocks) = 0;
  /// Overwrites every byte of the device blocks with `byte` on the compute stream.
  virtual void poison_device_blocks(const std::vector<uint32_t>& blocks, uint8_t byte) = 0;
  /// Checks device blocks on the compute stream and waits for the answer: the first mismatch, or
  /// none. The caller first waits for the ops that wrote the blocks.
  virtual std::optional<verify_mismatch> check_device_blocks(
      const std::vector<block_pattern>& blocks) = 0;
};

/// Returns why `config` cannot make a cache, if it cannot (before any device is asked).
std::optional<std::string> check_config(const kv_cache_config& config);

/// Allocates the device tensors and the pinned host pool and creates the streams. Throws
/// gpu_error, naming the reason, if there is no usable device (or CUDA was not built in), the
/// shape is unusable, or memory runs out.
std::unique_ptr<kv_cache> make_kv_cache(const kv_cache_config& config);

}  // namespace kvtier::gpu
