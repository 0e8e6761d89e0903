#pragma once

// The links' calibration fitted to a replay's own copies (`kvtier bench emulation
// --emit-calibration`). Copies inside a replay run 5-9% slower than `kvtier bench transfer`
// times them, at every size (docs/gpu.md): the replay has completion callbacks, actor threads and
// compute submitted beside its copies, which the bench lacks. Fitting the same line (fixed cost
// + bytes / rate per direction) to the copies of a real run carries those costs into the model.

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/transfer_bench.hpp"

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

/// `base` (a "kvtier.calibration/1" file) with each direction's rate and fixed cost replaced by
/// the fit, and `source` (where the copies came from) under "source".
nlohmann::json replay_calibration_json(nlohmann::json base, const replay_copy_fit& fit,
                                       const nlohmann::json& source);

/// Each size with its copies, median, fit and residual, and each direction's fit.
std::string format_replay_fit(const replay_copy_fit& fit);

}  // namespace kvtier::gpu
