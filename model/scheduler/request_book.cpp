#include "model/scheduler/request_book.hpp"

#include "core/check.hpp"

namespace kvtier {

live_request& request_book::add(const trace_request& r, std::vector<cache_block> blocks,
                                uint32_t block_size, uint32_t attempt) {
  if (auto old = requests_.find(r.seq); old != requests_.end()) {
    KVTIER_ASSERT(old->second.finished && !old->second.running && attempt > 0);
    retired_.push_back(old->second.record);
    requests_.erase(old);
  }
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
  x.record.attempt = attempt;
  return x;
}

}  // namespace kvtier
