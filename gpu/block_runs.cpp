#include "gpu/block_runs.hpp"

#include <algorithm>

#include "core/check.hpp"

namespace kvtier::gpu {

const char* to_string(transfer_direction d) {
  return d == transfer_direction::h2d ? "h2d" : "d2h";
}

std::vector<block_run> find_runs(const std::vector<block_pair>& pairs, run_rule rule) {
  std::vector<block_run> runs;
  for (uint32_t i = 0; i < pairs.size(); ++i) {
    bool extends = false;
    if (!runs.empty()) {
      const block_pair& prev = pairs[i - 1];
      bool host_next = pairs[i].host == prev.host + 1;
      bool device_next = pairs[i].device == prev.device + 1;
      extends = host_next && (rule == run_rule::host_id || device_next);
    }
    if (extends)
      ++runs.back().count;
    else
      runs.push_back(block_run{i, 1});
  }
  KVTIER_ASSERT(runs.empty() == pairs.empty());
  return runs;
}

std::optional<std::string> check_pairs(const std::vector<block_pair>& pairs,
                                       transfer_direction d, uint32_t device_blocks,
                                       uint32_t host_blocks) {
  for (const block_pair& p : pairs) {
    if (p.device >= device_blocks)
      return "device block " + std::to_string(p.device) + " is out of range [0, "
             + std::to_string(device_blocks) + ")";
    if (p.host >= host_blocks)
      return "host block " + std::to_string(p.host) + " is out of range [0, "
             + std::to_string(host_blocks) + ")";
  }
  bool to_device = d == transfer_direction::h2d;
  std::vector<uint32_t> targets;
  targets.reserve(pairs.size());
  for (const block_pair& p : pairs)
    targets.push_back(to_device ? p.device : p.host);
  std::sort(targets.begin(), targets.end());
  auto dup = std::adjacent_find(targets.begin(), targets.end());
  if (dup != targets.end())
    return std::string(to_device ? "device" : "host") + " block " + std::to_string(*dup)
           + " is the destination of more than one pair";
  return std::nullopt;
}

}  // namespace kvtier::gpu
