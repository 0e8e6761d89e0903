#pragma once

// The prefill side of direct handoffs: which blocks of each request go over the PD link, and
// when. A prefill step that completes blocks D lacks sends them layer by layer, each layer as
// soon as the step has computed it (FastDeploy's messager writes per layer as prefill
// progresses, docs/fastdeploy.md §6), so the transfer overlaps the prefill and the last layer
// arrives shortly after the step ends. Blocks D already holds (its prefix hit) are never sent,
// and a block is sent once even if a preemption makes P compute it again.

#include <cstdint>
#include <vector>

#include <absl/container/flat_hash_map.h>

#include "model/pd/pd_link.hpp"
#include "model/pd/pd_options.hpp"
#include "model/request_layout.hpp"

namespace kvtier {

struct prefill_stream {
  request_layout layout;
  uint64_t prompt = 0;
  uint32_t blocks = 0;       ///< blocks holding the prompt
  uint32_t skip = 0;         ///< leading blocks D holds: not sent
  uint32_t sent = 0;         ///< blocks [0, sent) are on the link or skipped
  int64_t kv_arrival_ns = -1;  ///< when the last layer sent so far arrives at D
};

/// Blocks wholly computed once the first `tokens` of a `prompt`-token request are.
uint32_t complete_prompt_blocks(const request_layout& layout, uint32_t block_size, uint64_t prompt,
                                uint64_t tokens);

class prefill_streams {
 public:
  prefill_streams(const pd_options& o, uint32_t block_size, uint32_t layers, uint64_t block_bytes)
    : link_(o.link_gbps, o.link_latency_ns), block_size_(block_size), layers_(layers),
      block_bytes_(block_bytes) {}

  void add(uint64_t req, prefill_stream s) { streams_[req] = std::move(s); }
  prefill_stream* find(uint64_t req);
  void erase(uint64_t req) { streams_.erase(req); }
  bool empty() const { return streams_.empty(); }

  /// A step computed `req`'s first `tokens` tokens, its layer l ending at `layer_end_ns[l]`.
  void computed(uint64_t req, uint64_t tokens, const std::vector<int64_t>& layer_end_ns);

  const pd_link& link() const { return link_; }
  uint64_t blocks_sent() const { return blocks_sent_; }
  uint64_t blocks_skipped() const { return blocks_skipped_; }

 private:
  absl::flat_hash_map<uint64_t, prefill_stream> streams_;
  pd_link link_;
  uint32_t block_size_;
  uint32_t layers_;
  uint64_t block_bytes_;
  uint64_t blocks_sent_ = 0;
  uint64_t blocks_skipped_ = 0;
};

}  // namespace kvtier
