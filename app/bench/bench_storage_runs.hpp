#pragma once
// `kvtier bench storage`'s timed runs of a backend's batch path and lone requests
// (bench_storage_command.cpp describes what is timed and why).

#include <cstdint>
#include <string>

#include "app/bench/bench_storage_figures.hpp"
#include "storage/storage_backend.hpp"

namespace kvtier {

// Lone requests timed per size and direction, of which each figure is the median.
constexpr int lone_samples = 21;

// Block hashes consecutive (alternating over the file backend's writer threads, the best case)
// or spread as a replay's hashes are.
enum class bench_hashes { consecutive, spread };

// Whether a run times lone requests beside its batches (a calibration's slope and intercept).
enum class lone_requests { timed, skipped };

// `batches` batches of `batch` blocks of `bytes` through the backend's batch path, one batch in
// flight at a time, and lone requests as `lone` says; every request after `gap_ms` idle. A put
// that stores short or a get that misses or reads wrong bytes sets `error`.
storage_figures run_backend(storage_backend& b, uint64_t bytes, uint32_t batch, uint32_t batches,
                            double gap_ms, bench_hashes hashes, lone_requests lone,
                            std::string& error);

}  // namespace kvtier
