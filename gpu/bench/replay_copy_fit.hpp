#pragma once

// The links' calibration fitted to a replay's own copies (`kvtier bench emulation
// --emit-calibration`). Copies inside a replay run 5-9% slower than `kvtier bench transfer`
// times them, at every size (docs/gpu.md): the replay has completion callbacks, actor threads and
// compute submitted beside its copies, which the bench lacks. Fitting the same line (fixed cost
// + bytes / rate per direction) to the copies of a real run carries those costs into the model.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/bench/transfer_bench.hpp"

namespace kvtier::gpu {

/// One copy of a real run, as its engine logged it.
struct measured_copy {
  transfer_direction direction = transfer_direction::h2d;
  uint32_t blocks = 0;
  double duration_ns = 0;
};

/// Per direction: one point per block count (the median of that count's copies, counted in
/// `copies`), fitted as the sweep is (each size weighted alike, by relative error).
struct replay_copy_fit {
  link_sweep h2d;
  link_sweep d2h;
  std::vector<uint32_t> h2d_copies;  ///< per point of h2d.points
  std::vector<uint32_t> d2h_copies;
};

/// The sizes of one direction as sweep points (median_ns: the median copy of that size).
std::vector<sweep_point> copy_points(const std::vector<measured_copy>& copies,
                                     transfer_direction d, uint64_t block_bytes,
                                     std::vector<uint32_t>* counts = nullptr);

/// A replay's copies have many sizes, some timed once: up to one size in ten (at least one) may
/// be left out as an outlier before the fit is refused.
size_t replay_left_out_max(size_t sizes);

/// Fits both directions (each the default method's); `layers` is the model's, over which the
/// H2D fixed cost is spread as the sweep spreads it.
replay_copy_fit fit_replay_copies(const std::vector<measured_copy>& copies, uint64_t block_bytes,
                                  uint32_t layers);

/// Why the fit cannot be written (a direction refused or without copies); empty: it can.
std::string replay_fit_refusal(const replay_copy_fit& fit);

/// A step that followed a swap-in, in both runs: how long the model had its layers wait for
/// data still in flight (its stall less the per-layer waits it charged), and the stall the GPU
/// measured.
struct waited_step {
  double modelled_data_wait_ns = 0;
  double measured_stall_ns = 0;
};

/// Steps a figure is fitted from (the layer wait, the submission per block): with fewer, the base
/// calibration's figure stays.
inline constexpr size_t step_fit_steps_min = 5;

/// What each layer of a step after a swap-in loses on the GPU when its data is in place: the
/// median of measured stall / layers over the steps whose modelled data wait is 0 (below 1 us).
/// It covers the wait on the copy's event and the launch gap every layer has, as a replay's
/// steps run them (the bench times the wait alone, behind a hold kernel: docs/gpu.md). None with
/// fewer than step_fit_steps_min such steps; `used` gets how many there were.
std::optional<double> fit_layer_wait(const std::vector<waited_step>& steps, uint32_t layers,
                                     size_t* used = nullptr);

/// One step of a real run: the blocks of the swap-in it followed (0: none) and how much longer it
/// took than its modelled busy time, waits and overhead account for (the host's time between
/// the commit and the GPU).
struct step_delay {
  uint32_t swap_in_blocks = 0;
  double extra_ns = 0;
};

/// The host's time per swapped-in block before a step's compute follows its swap-in: the median
/// over steps after a swap-in of (extra - the median extra of steps without one) / blocks, not
/// below 0. None with fewer than step_fit_steps_min steps after a swap-in (`used` gets how
/// many) or none without one.
std::optional<double> fit_submit_per_block(const std::vector<step_delay>& steps,
                                           size_t* used = nullptr);

/// What the replay's steps give the calibration, where fitted.
struct step_fit {
  std::optional<double> layer_wait_ns;
  std::optional<double> submit_ns_per_block;
};

/// `base` (a "kvtier.calibration/1" file) with each direction's rate and fixed cost replaced by
/// the fit (and the layer wait and the swap-in's submission per block, when fitted), and
/// `source` (where the copies came from) under "source".
nlohmann::json replay_calibration_json(nlohmann::json base, const replay_copy_fit& fit,
                                       const nlohmann::json& source,
                                       const step_fit& steps = {});

/// Each size with its copies, median, fit and residual, and each direction's fit.
std::string format_replay_fit(const replay_copy_fit& fit);

}  // namespace kvtier::gpu
