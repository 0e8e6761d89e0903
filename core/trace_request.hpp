#pragma once

// One request as a trace records it, in the one shape every reader produces.

#include <cstdint>
#include <string>
#include <vector>

namespace kvtier {

struct trace_request {
  uint64_t seq = 0;          ///< position in the merged stream, from 0
  uint32_t file = 0;         ///< index of the trace file, in the order the files were given
  uint64_t line = 0;         ///< 1-based line (JSONL, CSV) or request number (agentic JSON)
  int64_t arrival_ns = 0;    ///< recorded arrival, relative to the start of the trace

  uint32_t input_tokens = 0;
  uint32_t output_tokens = 0;

  /// Block identity, one of: trace-provided ids (trace_block_size > 0: `ids`, possibly none,
  /// of `trace_block_size` tokens each, in `id_space`), token ids (tokens non-empty), or nothing
  /// (no prefix information: every block of the request is unique).
  std::vector<uint64_t> ids;
  uint32_t trace_block_size = 0;
  uint64_t id_space = 0;
  std::vector<int32_t> tokens;

  /// Sessions (agentic conversations, native traces). A request with session != 0 and
  /// turn > 0 arrives `think_ns` after turn - 1 of its session finished (in timed replays; the
  /// hit-rate replay orders by arrival_ns). Turn 0 of a sub-agent session with
  /// parent_session != 0 arrives `think_ns` after (parent_session, parent_turn) finished.
  uint64_t session = 0;
  uint32_t turn = 0;
  int64_t think_ns = 0;
  bool follows_previous = false;  ///< arrival depends on an earlier turn (see above)
  uint64_t parent_session = 0;
  uint32_t parent_turn = 0;
};

}  // namespace kvtier
