#pragma once

// The unit of a transfer: a list of (device block, host block) pairs, in no particular order.
// Runs of pairs whose ids both grow by one are contiguous on the device (per tensor) and on the
// host, which is what lets a transfer use long copies instead of one per chunk.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvtier::gpu {

/// One block to move: from `host` to `device` (H2D) or from `device` to `host` (D2H).
struct block_pair {
  uint32_t device = 0;
  uint32_t host = 0;

  friend bool operator==(const block_pair& a, const block_pair& b) {
    return a.device == b.device && a.host == b.host;
  }
};

enum class transfer_direction : uint8_t { h2d, d2h };
const char* to_string(transfer_direction d);

/// A range of pairs: pairs[first, first + count).
struct block_run {
  uint32_t first = 0;
  uint32_t count = 0;

  friend bool operator==(const block_run& a, const block_run& b) {
    return a.first == b.first && a.count == b.count;
  }
};

/// What makes consecutive pairs one run.
enum class run_rule : uint8_t {
  both_ids,  ///< device and host id each one more than the previous pair's
  host_id,   ///< the host id one more than the previous pair's (device ids arbitrary)
};

/// Splits `pairs`, in their given order, into maximal runs under `rule`. Every pair belongs to
/// exactly one run; a lone pair is a run of one.
std::vector<block_run> find_runs(const std::vector<block_pair>& pairs, run_rule rule);

/// Returns why `pairs` cannot be moved in direction `d`, if they cannot: an id outside its pool,
/// or two pairs writing the same destination block (their order on the copy engines is not
/// defined). Reading one source block into several destinations is fine.
std::optional<std::string> check_pairs(const std::vector<block_pair>& pairs,
                                       transfer_direction d, uint32_t device_blocks,
                                       uint32_t host_blocks);

}  // namespace kvtier::gpu
