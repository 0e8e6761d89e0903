#include "actors/scheduler/request_book.hpp"

#include "core/check.hpp"

namespace kvtier {

live_request& request_book::add(const trace_request& r, std::vector<cache_block> blocks,
                                uint32_t block_size) {
  KVTIER_ASSERT(!requests_.count(r.seq));  // each request once
  live_request& x = requests_[r.seq];
  x.trace = r;
  x.trace.ids.clear();
  x.trace.ids.shrink_to_fit();
  x.trace.tokens.clear();
  x.trace.tokens.shrink_to_fit();
  x.layout = request_layout(blocks, block_size);
  x.prompt = r.input_tokens > 0 ? r.input_tokens : 1;
  x.output = r.output_tokens > 0 ? r.output_tokens : 1;
  x.record.req = r.seq;
  x.record.file = r.file;
  x.record.line = r.line;
  x.record.arrival_ns = r.arrival_ns;
  x.record.input_tokens = r.input_tokens;
  x.record.output_tokens = r.output_tokens;
  x.record.blocks = x.layout.listed();
  return x;
}

}  // namespace kvtier
