#pragma once

// `kvtier bench transfer --conditions`: the copy rate of the default method under each condition
// a replay has and the calibration sweep lacks, one at a time and all together, so that the
// replay's slower copies (docs/gpu.md "Copy rates under replay conditions") can be traced to a
// cause. Each figure is the median of the bench's repetitions (CUDA-event time) after a warm-up
// that is verified byte for byte when the bench verifies.

#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpu/block_runs.hpp"

namespace kvtier::gpu {

struct bench_options;

enum class copy_condition : uint8_t {
  baseline,        ///< as the sweep: back to back, contiguous host ids, random device ids
  callbacks,       ///< on_complete set: a host function per op (and per H2D layer) that takes
                   ///< a mutex and queues the event for another thread, as the replay's does
  scattered_host,  ///< host ids a seeded random choice with no two consecutive, over a pool 4x
                   ///< the largest copy
  compute_thread,  ///< another thread submits emulated compute passes throughout
  device_runs,     ///< device ids in shuffled runs of 2..32 blocks
  callbacks_compute,  ///< callbacks and the compute thread, sharing the submitters' lock
  replay_like,     ///< all of the above, the callback taking the lock the submitters take
};

const char* to_string(copy_condition c);

/// Every condition, in the order the probe measures and prints them.
std::vector<copy_condition> all_copy_conditions();

/// One (condition, copy size, direction) cell.
struct condition_figure {
  copy_condition condition = copy_condition::baseline;
  transfer_direction direction = transfer_direction::h2d;
  uint32_t blocks = 0;
  uint64_t bytes = 0;
  double median_ns = 0;
  double gbps = 0;         ///< bytes / median_ns (1e9 B/s)
  double of_baseline = 0;  ///< gbps over the baseline cell of the same size and direction
  bool verified = false;   ///< the warm-up copy was checked byte for byte
};

/// Sets gbps from bytes and median_ns, and of_baseline from the baseline cell of the same size
/// and direction (0 where there is none or it took no time).
void rate_against_baseline(std::vector<condition_figure>& cells);

/// `count` distinct host ids in [0, pool), no two of them consecutive, in a seeded random order
/// (the same for a seed on every platform): a copy the staging plan cannot merge into longer
/// host copies. Requires pool >= 2 * count - 1; throws gpu_error otherwise.
std::vector<uint32_t> scattered_host_ids(uint64_t seed, uint32_t count, uint32_t pool);

/// Measures `conditions` for each of `sizes` (blocks per copy) at `block_size` in `directions`,
/// on caches of its own (the size_run's is gone by then). Throws gpu_error without a device, or
/// if a verified warm-up finds a wrong byte.
std::vector<condition_figure> measure_copy_conditions(
  const bench_options& o, uint32_t block_size, const std::vector<uint32_t>& sizes,
  const std::vector<copy_condition>& conditions, std::ostream* progress,
  const std::vector<transfer_direction>& directions = {transfer_direction::h2d,
                                                       transfer_direction::d2h});

/// A table: per condition and size, each direction's GB/s and its share of the baseline.
std::string format_conditions_table(const std::vector<condition_figure>& cells,
                                    uint32_t block_size);

/// The cells as a JSON array (docs/outputs.md, `conditions[]`).
nlohmann::json conditions_json(const std::vector<condition_figure>& cells);

}  // namespace kvtier::gpu
