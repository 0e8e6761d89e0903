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
/// backend), real CUDA copies on the GPU (docs/gpu.md), or real copies by the CPU between an
/// engine's KV in shared memory and kvtier's host tier (kvtier serve only, docs/protocol.md);
/// the real ones run on the wall clock.
enum class copy_backend_kind : uint8_t { modelled, cuda, shm };

/// When a controller does a step's tree work that no grant reads (its write-through backups,
/// and the commits of computed blocks nothing before the grant sees): within its commit (the
/// replays: their copies and timings are the goldens'), or after its grant went out (a live
/// engine waits for the grant alone: docs/design.md, "Tree work after the reply").
enum class tree_work_timing : uint8_t { in_step, after_reply };

}  // namespace kvtier
