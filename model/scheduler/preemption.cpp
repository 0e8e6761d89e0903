#include "model/scheduler/preemption.hpp"

namespace kvtier {

const char* to_string(preemption_mode m) {
  switch (m) {
    case preemption_mode::recompute: return "recompute";
    case preemption_mode::save_to_storage: return "save_to_storage";
    case preemption_mode::swap_to_host: return "swap_to_host";
  }
  return "?";
}

std::optional<preemption_mode> parse_preemption_mode(const std::string& text) {
  for (auto m : {preemption_mode::recompute, preemption_mode::save_to_storage,
                 preemption_mode::swap_to_host})
    if (text == to_string(m))
      return m;
  return std::nullopt;
}

const char* to_string(prefetch_policy p) {
  switch (p) {
    case prefetch_policy::best_effort: return "best_effort";
    case prefetch_policy::wait_complete: return "wait_complete";
    case prefetch_policy::timeout: return "timeout";
  }
  return "?";
}

std::optional<prefetch_policy> parse_prefetch_policy(const std::string& text) {
  for (auto p : {prefetch_policy::best_effort, prefetch_policy::wait_complete,
                 prefetch_policy::timeout})
    if (text == to_string(p))
      return p;
  return std::nullopt;
}

uint32_t saved_private_blocks(const request_layout& layout, uint64_t computed,
                              uint32_t block_size) {
  uint64_t listed = layout.listed_tokens();
  if (computed <= listed || block_size == 0)
    return 0;
  return static_cast<uint32_t>((computed - listed) / block_size);
}

void name_private_blocks(uint64_t req, uint32_t count, uint32_t block_size,
                         std::vector<cache_block>& blocks) {
  for (uint32_t i = 0; i < count; ++i) {
    block_hash parent = blocks.empty() ? 0 : blocks.back().hash;
    auto part = static_cast<uint32_t>(blocks.size());
    blocks.push_back({hash_trace_block(parent, preempted_block_space, req, part), block_size});
  }
}

}  // namespace kvtier
