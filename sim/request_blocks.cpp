#include "sim/request_blocks.hpp"

#include "runtime/config/options.hpp"
#include "sim/trace/trace_reader.hpp"

namespace kvtier {

request_blocks::request_blocks(uint32_t cache_block_size, std::vector<std::string> files,
                               uint64_t max_blocks)
  : block_size_(cache_block_size),
    max_blocks_(max_blocks),
    files_(std::move(files)),
    checked_(files_.size(), 0) {
  // nop
}

uint64_t request_blocks::blocks_at_most(const trace_request& r) const {
  // Every mapping covers at most the prompt's tokens, each cache block holding up to a block.
  return (uint64_t{r.input_tokens} + block_size_ - 1) / block_size_;
}

void request_blocks::map(const trace_request& r, std::vector<cache_block>& out) {
  out.clear();
  // Checked before anything is built: one line of a few bytes may claim 4e9 tokens.
  if (uint64_t n = blocks_at_most(r); n > max_blocks_) {
    std::string file = r.file < files_.size() ? files_[r.file] : "trace";
    throw trace_error(file, r.line, "",
                      "a request of " + std::to_string(r.input_tokens) + " input tokens covers " +
                        std::to_string(n) + " cache blocks of " + std::to_string(block_size_) +
                        " tokens, more than trace.max_blocks_per_request (" +
                        std::to_string(max_blocks_) + ")");
  }
  // Trace ids name the blocks whenever the trace lists them, even none (a prompt shorter than
  // one trace block): the tokens no listed block covers are the request's own, never blocks of
  // the prompt (docs/design.md, "Blocks and their identity").
  if (r.trace_block_size > 0) {
    if (r.file >= checked_.size())
      checked_.resize(r.file + 1, 0);
    if (checked_[r.file] != r.trace_block_size) {
      if (auto err = check_block_sizes(r.trace_block_size, block_size_)) {
        std::string file = r.file < files_.size() ? files_[r.file] : "trace";
        throw config_error(file + ": " + *err);
      }
      checked_[r.file] = r.trace_block_size;
    }
    map_trace_blocks(r.id_space, r.ids.data(), r.ids.size(), r.input_tokens, r.trace_block_size,
                     block_size_, out);
    return;
  }
  if (!r.tokens.empty()) {
    map_token_blocks(r.tokens.data(), r.tokens.size(), block_size_, out);
    return;
  }
  // No prefix information: blocks of this request alone, named by (file, seq, index).
  uint64_t n = (uint64_t{r.input_tokens} + block_size_ - 1) / block_size_;
  scratch_.resize(n);
  for (uint64_t i = 0; i < n; ++i)
    scratch_[i] = i;
  uint64_t space = hash_trace_block(0, ~uint64_t{r.file}, r.seq, 0);
  map_trace_blocks(space, scratch_.data(), n, r.input_tokens, block_size_, block_size_, out);
}

}  // namespace kvtier
