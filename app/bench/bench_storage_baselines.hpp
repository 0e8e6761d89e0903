#pragma once
// `kvtier bench storage`'s baselines: the same bytes a backend moves, moved the plainest way to
// the same place, timed in the same run as the backend (bench_storage_command.cpp).

#include <cstdint>
#include <string>

#include "app/bench/bench_storage_figures.hpp"

namespace kvtier {

// Memory: `blocks` blocks, each in memory of its own (as the backend holds them), copied into one
// batch's worth of reused buffers (as the backend's get copies them into the bench's): the same
// sources, destinations and sizes, one memcpy each.
storage_figures baseline_memory(uint64_t bytes, uint32_t blocks, uint32_t batch);

// Redis: SET, then GET, of whole blocks over one blocking connection to `address`.
storage_figures baseline_redis(const std::string& address, uint64_t bytes, uint32_t blocks,
                               std::string& error);

// Files: one file in `dir` written, then read, sequentially in block-sized calls (dd's way); the
// reads land in one batch's worth of reused buffers, as the backend's gets do, not in one buffer
// that stays in the CPU's cache.
storage_figures baseline_file(const std::string& dir, uint64_t bytes, uint32_t blocks,
                              uint32_t batch, std::string& error);

}  // namespace kvtier
