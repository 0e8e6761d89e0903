#pragma once

// Small pieces that every reader shares.

#include <cstdint>

#include "sim/trace/trace_reader.hpp"

namespace kvtier {

/// Clears every field of `out` (keeping the capacity of its vectors) before a reader fills it.
void reset_request(trace_request& out);

/// Handles a bad line: throws `error` unless `options` skip bad lines, else counts it in
/// `skipped` and passes it to options.on_skip.
void skip_or_throw(const reader_options& options, const trace_error& error, uint64_t& skipped);

}  // namespace kvtier
