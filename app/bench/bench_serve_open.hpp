#pragma once

// kvtier bench serve --open: the open-loop latency curve of a running `kvtier serve`
// (BENCHMARKS.md, "The open-loop curve").

#include <nlohmann/json.hpp>

#include "app/commands.hpp"
#include "runtime/config/replay_config.hpp"
#include "sim/full/preloaded_trace.hpp"

namespace kvtier {

/// Runs every offered load of `args.steps_per_s` in turn against the server and writes the curve
/// into `out` (printing a row per load); returns the exit code.
int run_open_loop(const bench_serve_args& args, const replay_config& rc, const preloaded_trace& t,
                  nlohmann::json& out);

}  // namespace kvtier
