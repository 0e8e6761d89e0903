#pragma once

// How a run is carried out, as enums that every layer reads (a job, a timed config, the server's
// settings): one spelling for each mode, never a boolean beside an enum.

#include <cstdint>

namespace kvtier {

/// What a replay models: the four actors with timing (full), or the cache's decisions alone
/// (hitrate: no clock, no actors).
enum class replay_mode : uint8_t { full, hitrate };

/// Which clock the actors run on: virtual time (deterministic) or the wall clock.
enum class clock_mode : uint8_t { virtual_time, wall };

/// How a run moves block bytes: modelled links (no bytes, or pattern bytes for a real storage
/// backend) or real CUDA copies on the GPU (docs/gpu.md), which run on the wall clock.
enum class copy_backend_kind : uint8_t { modelled, cuda };

}  // namespace kvtier
