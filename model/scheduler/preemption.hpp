#pragma once

// What a preempted request's KV becomes (scheduler.preemption), and the storage prefetch stop
// policies (storage.prefetch_policy). Scheduler and controller share these rules.
//
//  recompute        the victim releases its blocks: committed prompt blocks stay in the tree as
//                   evictable copies (FastDeploy's request_finish), the rest is freed; whatever
//                   survives is reused at re-admission, everything else is computed again.
//  save_to_storage  FastDeploy PR #7107: before the blocks are freed, every computed block of
//                   the victim, prompt and generated tokens alike, gets a host copy (D2H) and is
//                   written from it to storage; re-admission matches them in the tree, then in
//                   storage (a prefetch when it reaches the head of the queue). The device blocks
//                   are not reused until the copy reading them is done (the reuse barrier).
//  swap_to_host     every computed block of the victim gets a host copy (evicting host leaves as
//                   needed); its device copy is released behind it, so evicting it costs nothing,
//                   and re-admission swaps the host copies back in.
//
// Generated tokens carry no block identity in any trace. So that a saved request can find its own
// generated blocks again, its full blocks past the listed ones are named at preemption by a hash
// chained over the request's id (`preempted_block_space`): they are shareable with the request
// itself only. Both sides extend the request's layout with them by the same rule
// (`saved_private_blocks`), which leaves its block counts unchanged.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/block_hash.hpp"
#include "model/request_layout.hpp"

namespace kvtier {

enum class preemption_mode : uint8_t { recompute, save_to_storage, swap_to_host };

const char* to_string(preemption_mode m);
std::optional<preemption_mode> parse_preemption_mode(const std::string& text);

/// When a request whose storage prefetch is still loading may be scheduled (SGLang HiCache's
/// prefetch stop policies): best_effort at once, using whatever has landed by its admission;
/// wait_complete once every block landed; timeout once every block landed or a deadline passed.
enum class prefetch_policy : uint8_t { best_effort, wait_complete, timeout };

const char* to_string(prefetch_policy p);
std::optional<prefetch_policy> parse_prefetch_policy(const std::string& text);

/// The id space of the blocks named at preemption (outside any trace's: trace files count from 0).
inline constexpr uint64_t preempted_block_space = 0x7072'6565'6d70'7400ULL;

/// Full blocks past the listed ones that lie within the first `computed` tokens: the private
/// blocks a preemption saves (and names).
uint32_t saved_private_blocks(const request_layout& layout, uint64_t computed,
                              uint32_t block_size);

/// Names `count` more private blocks of request `req` and appends them to `blocks`, chained on
/// its last block.
void name_private_blocks(uint64_t req, uint32_t count, uint32_t block_size,
                         std::vector<cache_block>& blocks);

}  // namespace kvtier
