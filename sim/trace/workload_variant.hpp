#pragma once

// A workload variant: one trace file as a seed redraws it, so that replicates of a sweep
// (`--seeds`) see different but statistically alike workloads (docs/traces.md, "Workload
// variants"). A variant keeps a fraction of the sessions, and shifts each session (or each
// request without a session) later by a seeded offset: whole sessions move, so turns keep their
// order and think times. Every draw is a hash of the seed, the file and the session, so one
// seed always gives the same variant, however the files are merged or the replay is run.

#include <cstdint>
#include <memory>

#include "sim/trace/trace_reader.hpp"

namespace kvtier {

struct workload_variant {
  uint64_t seed = 0;
  double sample_fraction = 1;  ///< sessions kept (trace.sample_fraction)
  double arrival_jitter_s = 0;  ///< requests without a session: shifted by [0, this) s
  double session_shift_s = 0;  ///< sessions: shifted by [0, this) s, every turn alike

  /// True when the variant differs from the trace as recorded.
  bool any() const {
    return sample_fraction < 1 || arrival_jitter_s > 0 || session_shift_s > 0;
  }
};

/// `source` (file number `file_index`) as `variant` draws it; arrivals stay non-decreasing.
/// Copy `copy` of a file (sim/trace/session_copies.hpp) draws apart from the file's other
/// copies. Returns `source` itself when the variant changes nothing.
std::unique_ptr<trace_source> vary_workload(std::unique_ptr<trace_source> source,
                                            uint32_t file_index,
                                            const workload_variant& variant,
                                            uint32_t copy = 0);

}  // namespace kvtier
