#include "runtime/config/trace_keys.hpp"

namespace kvtier {

std::vector<option_spec> trace_key_specs() {
  return {
    {keys::trace::time_scale, 1e-6, 1e6, {}, false,
     "stretches the trace's recorded times (arrivals, think times): 4 = a quarter of the request "
     "rate, as one of four instances sharing a cluster's trace would see it"},
    {keys::trace::max_line_bytes, 1024, 4294967296.0, {}, false,
     "longest trace line read, in bytes: a longer one is an error before it is buffered whole"},
    {keys::trace::max_document_bytes, 1024, 68719476736.0, {}, false,
     "largest agentic JSON document read, in bytes (it is read whole)"},
    {keys::trace::max_blocks_per_request, 1, max_block_count, {}, false,
     "cache blocks one request may cover (ceil(input tokens / cache.block_size)), at most: a "
     "larger request is an error before its blocks are built"},
    {keys::trace::sample_fraction, 1e-6, 1, {}, false,
     "workload variant: the fraction of sessions (requests without one) kept, drawn by the "
     "replay's seed; 1 keeps all. docs/traces.md, \"Workload variants\""},
    {keys::trace::arrival_jitter_s, 0, 1e6, {}, false,
     "workload variant: each request without a session arrives later by a seeded [0, this) "
     "seconds of recorded time (before trace.time_scale); 0 keeps the recorded arrivals"},
    {keys::trace::session_shift_s, 0, 1e6, {}, false,
     "workload variant: each session (an agentic conversation and its sub-agents) starts later by "
     "a seeded [0, this) seconds of recorded time; 0 keeps the recorded starts"},
    {keys::trace::session_copies, 1, 4096, {}, false,
     "replays each trace file this many times as different users (own block ids and sessions; "
     "starts drawn apart by trace.session_shift_s): N x the load of a closed-loop trace. "
     "docs/traces.md, \"Workload variants\""},
  };
}

}  // namespace kvtier
