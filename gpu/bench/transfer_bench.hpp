#pragma once

// `kvtier bench transfer`: how fast each transfer method moves scattered KV blocks between the
// device and pinned host memory, against the link's own speed measured in the same run, and the
// calibration of the modelled backend that follows from it.
//
// Per block size: one transfer is `transfer_bytes` of whole blocks (all layers, K and V),
// placed at random in a device pool three times its size, with part of the blocks in contiguous
// runs; host blocks are one contiguous range per transfer. Measured, each as the median of
// `repetitions` CUDA-event timings after a warm-up run that is verified byte for byte:
//   - the bulk reference: one contiguous cudaMemcpyAsync of the same bytes, per direction, and
//     both directions at once (duplex);
//   - each method per direction, as GB/s (1e9 B/s) and as a fraction of the reference;
//   - each method in both directions at once, against the bulk duplex;
//   - per method and direction a small transfer too, for the fit t = latency + bytes / bandwidth
//     (and for H2D the same per layer step);
//   - the calibration sweep: the default method per direction at sizes from one block to the
//     full transfer, as swap-ins and backups have them, fitted by least relative error, with
//     each size's residual shown and a fit that misses rejected (docs/gpu.md); by default each
//     D2H size is also timed under a replay's conditions (copy_conditions.hpp), and the D2H
//     fit goes through those times.

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/bench/copy_conditions.hpp"
#include "gpu/device_info.hpp"
#include "gpu/kv_cache.hpp"

namespace kvtier::gpu {

/// What the calibration sweep's fit goes through.
enum class sweep_conditions : uint8_t {
  /// D2H: each size also timed under the replay's conditions (copy_conditions.hpp,
  /// replay_like), as a replay's backups run; H2D: the bench's own copies, as a replay's
  /// swap-ins run (docs/gpu.md "Copy rates under replay conditions").
  replay_like,
  bench,  ///< the bench's own copies (the fresh-host column), as before
};

struct bench_options {
  std::vector<uint32_t> block_sizes{16, 64};
  model_shape shape = llama3_8b_kv();    ///< per block size of block_sizes
  uint64_t transfer_bytes = 2ull << 30;  ///< per transfer, rounded down to whole blocks
  uint32_t repetitions = 5;
  bool verify = true;
  std::vector<transfer_method> methods{transfer_method::per_chunk, transfer_method::batched,
                                       transfer_method::staging, transfer_method::zero_copy};
  double run_share = 0.5;       ///< share of blocks that lie in contiguous runs
  uint32_t run_length_max = 32;
  uint32_t small_blocks = 4;    ///< blocks of the small transfer of the latency fit
  uint64_t seed = 1;
  kv_cache_config tuning;       ///< staging and zero-copy settings; the rest is the bench's
  /// The sweep also times each size after this long with the link idle (0: it does not): a
  /// replay's copies are often isolated, the bench's back to back.
  uint32_t idle_gap_ms = 0;
  /// Copy sizes (blocks) at which the copy-conditions probe runs (copy_conditions.hpp), per
  /// block size after the rest; empty: it does not.
  std::vector<uint32_t> condition_sizes;
  sweep_conditions sweep = sweep_conditions::replay_like;
};

/// t = latency + bytes / bandwidth, from a small and a large transfer.
struct link_fit {
  transfer_method method = transfer_method::automatic;
  double bandwidth_gbps = 0;
  double latency_us = 0;
  double layer_latency_us = 0;  ///< H2D: the same fit per layer step; D2H: 0
};

/// Fits `link_fit` through (small_bytes, small_ns) and (large_bytes, large_ns).
link_fit fit_link(uint64_t small_bytes, double small_ns, uint64_t large_bytes, double large_ns);

/// One size of the calibration sweep: `blocks` whole blocks in one transfer.
struct sweep_point {
  uint32_t blocks = 0;
  uint64_t bytes = 0;
  double median_ns = 0;       ///< back to back: median of the repetitions after a warm-up
  double idle_median_ns = 0;  ///< each after bench_options::idle_gap_ms idle (0: not measured)
  /// Each with emulated compute running beside it (busy passes of 32 layers of 10 us on the
  /// compute stream, submitted after the copy): how a replay's backups and swap-ins run.
  double beside_compute_ns = 0;
  /// Each to (or from) host blocks no copy has touched before, as a replay's backups and
  /// swap-ins meet them: the GPU's host address translations are then cold.
  double fresh_host_ns = 0;
  /// Each under the replay's conditions (copy_conditions.hpp, replay_like; 0: not measured).
  double replay_like_ns = 0;
  /// What the fit goes through: replay_like_ns where measured, else fresh_host_ns, else
  /// beside_compute_ns, else median_ns.
  double fitted_source_ns() const {
    if (replay_like_ns > 0)
      return replay_like_ns;
    if (fresh_host_ns > 0)
      return fresh_host_ns;
    return beside_compute_ns > 0 ? beside_compute_ns : median_ns;
  }
  double fitted_ns = 0;       ///< the fit's value at this size
  bool used = true;           ///< false: the one outlier the fit left out
  double residual() const {
    double t = fitted_source_ns();
    return t > 0 ? (fitted_ns - t) / t : 0;
  }
};

/// The most a size used by the fit may miss it by before the fit is refused.
inline constexpr double sweep_residual_max = 0.08;

/// The calibration sweep of one direction and its fit.
struct link_sweep {
  transfer_direction direction = transfer_direction::h2d;
  std::vector<sweep_point> points;
  link_fit fit;
  double max_residual = 0;  ///< the largest |residual| among the points used
  std::string rejected;     ///< why the fit is refused; empty: accepted
};

/// The sizes the sweep times for a transfer of `blocks` blocks: 1, 2, 4, ... and `blocks`.
std::vector<uint32_t> sweep_sizes(uint32_t blocks);

/// Fits t = fixed + bytes / bandwidth through fitted_source_ns() by least relative error
/// (weights 1 / t^2: a one-block copy counts as much as the full one; a negative fixed cost is
/// fitted as 0). While a point misses by more than sweep_residual_max, the fit is redone without
/// the worst one, up to `max_left_out` of them; if a point still misses, `rejected` names it and
/// the ones left out. The fixed cost is the link_fit's
/// latency; for H2D, which the model charges per layer, also layer_latency_us = fixed / layers.
link_sweep fit_sweep(transfer_direction d, transfer_method m, std::vector<sweep_point> points,
                     uint32_t layers, size_t max_left_out = 1);

struct block_size_figures;

/// Puts the replay-like D2H cells (copy_conditions.hpp) into the D2H sweep's points of the same
/// sizes and refits that sweep, and the D2H calibration, through them; H2D stays as it is.
void refit_d2h_through(const std::vector<condition_figure>& replay_like, block_size_figures& s,
                       uint32_t layers);

struct method_figures {
  transfer_method method = transfer_method::automatic;
  transfer_direction direction = transfer_direction::h2d;
  double median_ns = 0;
  double gbps = 0;
  double of_bulk = 0;  ///< gbps over the same run's bulk reference in this direction
  bool verified = false;
  link_fit fit;        ///< from a small transfer and this one
};

struct duplex_figures {
  transfer_method method = transfer_method::automatic;  ///< in both directions
  double median_ns = 0;
  double gbps = 0;     ///< bytes of both directions over the time both took together
  double of_bulk = 0;  ///< over the bulk duplex
  bool verified = false;
};

struct block_size_figures {
  uint32_t block_size = 0;
  uint32_t blocks = 0;     ///< per transfer
  uint64_t bytes = 0;      ///< per transfer
  double run_share = 0;    ///< of the blocks, as placed
  double bulk_h2d_gbps = 0;
  double bulk_d2h_gbps = 0;
  double bulk_duplex_gbps = 0;
  std::vector<method_figures> methods;
  std::vector<duplex_figures> duplex;
  link_fit h2d_fit;  ///< of the default method: the calibration (from the sweep)
  link_fit d2h_fit;
  std::vector<link_sweep> sweeps;  ///< H2D then D2H
  std::vector<condition_figure> conditions;  ///< empty unless condition_sizes was given
};

struct bench_report {
  device_info device;
  std::string measured_at;  ///< ISO 8601, UTC
  model_shape shape;
  uint64_t transfer_bytes = 0;
  uint32_t repetitions = 0;
  bool verify = false;
  std::vector<block_size_figures> sizes;
  /// The compute emulation's fit, when measured (its layer wait goes into the calibration).
  compute_calibration compute;
};

/// Runs the benchmark; `progress`, if given, gets one line per measurement. Throws gpu_error if
/// there is no device, or if a verified run finds a wrong byte (naming method, block and layer).
bench_report run_transfer_bench(const bench_options& options, std::ostream* progress = nullptr);

/// The figures as a text table per block size, with the targets and whether each was met.
std::string format_bench_table(const bench_report& report);

/// Everything in the report, schema "kvtier.transfer_bench/1".
nlohmann::json bench_to_json(const bench_report& report);

/// Targets missed, one line each (none: all met): best method >= 95% of bulk per direction;
/// best duplex >= 90% of bulk duplex; best >= 4x per-chunk at <= 16-token blocks, >= 2x above.
std::vector<std::string> missed_targets(const bench_report& report);

/// The modelled backend's calibration for one measured block size, schema
/// "kvtier.calibration/1": the default method per direction with its fitted bandwidth and
/// latency (and per-layer latency for H2D), and the duplex rate of the two together.
nlohmann::json calibration_json(const bench_report& report, uint32_t block_size);

/// Why the calibration of `block_size` cannot be used (a sweep's fit refused); empty: it can.
std::string calibration_refusal(const bench_report& report, uint32_t block_size);

/// Writes calibration_json() to `path`; throws gpu_error if it cannot.
void write_calibration_file(const std::string& path, const bench_report& report,
                            uint32_t block_size);

}  // namespace kvtier::gpu
