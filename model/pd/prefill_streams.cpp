#include "model/pd/prefill_streams.hpp"

#include <algorithm>

#include "core/check.hpp"

namespace kvtier {

uint32_t complete_prompt_blocks(const request_layout& layout, uint32_t block_size, uint64_t prompt,
                                uint64_t tokens) {
  if (tokens >= prompt)
    return layout.blocks_for(prompt);
  if (tokens <= layout.listed_tokens())
    return layout.complete_within(tokens);
  return layout.listed() + static_cast<uint32_t>((tokens - layout.listed_tokens()) / block_size);
}

prefill_stream* prefill_streams::find(uint64_t req) {
  auto it = streams_.find(req);
  return it == streams_.end() ? nullptr : &it->second;
}

void prefill_streams::computed(uint64_t req, uint64_t tokens,
                               const std::vector<int64_t>& layer_end_ns) {
  prefill_stream* s = find(req);
  if (!s)
    return;
  KVTIER_ASSERT(layer_end_ns.size() == layers_);
  uint32_t complete = complete_prompt_blocks(s->layout, block_size_, s->prompt, tokens);
  if (s->sent < s->skip) {
    uint32_t skipped = std::min(complete, s->skip) - std::min(s->sent, s->skip);
    blocks_skipped_ += skipped;
    s->sent = std::max(s->sent, std::min(complete, s->skip));
  }
  if (complete <= s->sent)
    return;
  uint64_t n = complete - s->sent;
  s->sent = complete;
  blocks_sent_ += n;
  uint64_t layer_bytes = n * (block_bytes_ / layers_);
  for (int64_t ready : layer_end_ns)
    s->kv_arrival_ns = std::max(s->kv_arrival_ns, link_.send(ready, layer_bytes));
}

}  // namespace kvtier
