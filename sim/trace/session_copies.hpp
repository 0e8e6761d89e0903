#pragma once

// Session copies (trace.session_copies, docs/traces.md "Workload variants"): a trace file
// replayed as N users instead of one, to raise the load of a closed-loop trace (agentic
// conversations, whose turns wait for each other, so trace.time_scale cannot raise it). Copy k
// of a file is the file with its own block identity and its own sessions: its ids move to an
// id space of their own and its session ids carry k, so copies share no prefix with each other
// and no turn of one waits for another. Their starts are spread by the workload variant
// (trace.session_shift_s draws each copy's sessions apart; vary_workload with `copy`).

#include <cstdint>
#include <memory>

#include "sim/trace/trace_reader.hpp"

namespace kvtier {

/// The most copies: the copy number lives in bits 48-59 of a session id, above every file's.
inline constexpr uint32_t max_session_copies = 4096;

/// Copy `copy` (1 .. max_session_copies - 1) of `source`; copy 0 is `source` itself.
std::unique_ptr<trace_source> session_copy(std::unique_ptr<trace_source> source, uint32_t copy);

}  // namespace kvtier
