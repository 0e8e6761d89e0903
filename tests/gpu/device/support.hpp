#pragma once

// Shared pieces of the device tests: shapes, caches, block placements with runs, and checks of
// every byte of every block after a transfer.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../test_shapes.hpp"
#include "gpu/kv_cache.hpp"
#include "gpu/bench/transfer_bench.hpp"

namespace kvtier::gpu::test {

/// 4 layers x 2 heads x 64 dims, 16 tokens, bf16: 4 KiB chunks, 32 KiB host blocks (sizes only,
/// no blocks).
kv_layout small_shape();
/// Llama-3-8B-like: 32 layers x 8 heads x 128 dims, bf16.
kv_layout llama_shape(uint32_t block_size);

/// A cache of `sizes`' shape and block size.
kv_cache_config make_config(const kv_layout& sizes, uint32_t device_blocks, uint32_t host_blocks);

/// What the tests fill each block with.
uint64_t device_hash(uint32_t block);
uint64_t host_hash(uint32_t block);

/// `count` pairs; device ids scattered with runs of 2..8 mixed in; host ids one consecutive
/// range from a random start, or scattered the same way.
std::vector<block_pair> scattered_pairs(uint64_t seed, uint32_t count, const kv_layout& layout,
                                        bool host_consecutive);

void fill_every_host_block(kv_cache& c);
void fill_every_device_block(kv_cache& c);

/// Every device block: a destination holds its source's host_hash, any other its device_hash.
/// Returns the first mismatch as text, or "".
std::string check_devices_after_h2d(kv_cache& c, const std::vector<block_pair>& pairs);
/// Every host block: a destination holds its source's device_hash, any other its host_hash.
std::string check_hosts_after_d2h(kv_cache& c, const std::vector<block_pair>& pairs);

}  // namespace kvtier::gpu::test
