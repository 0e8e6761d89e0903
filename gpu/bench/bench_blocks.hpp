#pragma once

// The transfer bench's blocks: where a transfer's blocks lie (random device blocks with runs
// mixed in, one host range per direction), and filling, poisoning and checking them so that
// every verified run proves each byte. Internal to the bench.

#include <cstdint>
#include <optional>
#include <vector>

#include "gpu/kv_cache.hpp"
#include "gpu/bench/transfer_bench.hpp"

namespace kvtier::gpu::bench {

struct placement {
  std::vector<block_pair> d2h;  ///< device blocks -> host blocks [n, 2n)
  std::vector<block_pair> h2d;  ///< host blocks [0, n) -> other device blocks
  double run_share = 0;         ///< of all 2n blocks, those in runs of both ids
};

/// The ids [0, pool) in a shuffled order of segments: single ids, or runs of 2..run_length_max
/// consecutive ids in the proportion that puts about run_share of the ids in runs. The same order
/// for a seed on every platform.
std::vector<uint32_t> shuffled_runs(uint64_t seed, uint32_t pool, double run_share,
                                    uint32_t run_length_max);

/// Cuts a device pool of `pool` blocks into segments (single blocks, or runs of
/// 2..run_length_max blocks in the proportion that puts run_share of the blocks in runs),
/// shuffles them by the seed, and deals the blocks out in that order: first the D2H sources,
/// then the H2D destinations. Requires pool >= 2n.
placement place_blocks(uint32_t n, uint32_t pool, const bench_options& o);

/// Sources get patterns, targets get poison, and a check afterwards compares each target with
/// the pattern of its source.
void fill_host_sources(kv_cache& c, const std::vector<block_pair>& pairs);
void poison_host_targets(kv_cache& c, const std::vector<block_pair>& pairs);
std::optional<verify_mismatch> check_host_targets(kv_cache& c,
                                                  const std::vector<block_pair>& pairs);
void fill_device_sources(kv_cache& c, const std::vector<block_pair>& pairs);
/// Also waits for the poison: an H2D does not wait for the compute stream, where it runs.
void poison_device_targets(kv_cache& c, const std::vector<block_pair>& pairs);
std::optional<verify_mismatch> check_device_targets(kv_cache& c,
                                                    const std::vector<block_pair>& pairs);

}  // namespace kvtier::gpu::bench
