#include "sim/trace/reader_support.hpp"

namespace kvtier {

void reset_request(trace_request& out) {
  out.seq = 0;
  out.file = 0;
  out.line = 0;
  out.arrival_ns = 0;
  out.input_tokens = 0;
  out.output_tokens = 0;
  out.ids.clear();
  out.trace_block_size = 0;
  out.id_space = 0;
  out.tokens.clear();
  out.session = 0;
  out.turn = 0;
  out.think_ns = 0;
  out.follows_previous = false;
  out.parent_session = 0;
  out.parent_turn = 0;
}

void skip_or_throw(const reader_options& options, const trace_error& error, uint64_t& skipped) {
  if (!options.skip_bad_lines)
    throw error;
  ++skipped;
  if (options.on_skip)
    options.on_skip(error);
}

}  // namespace kvtier
