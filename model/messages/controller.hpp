#pragma once

// A scheduler's messages to its cache controller and the answers (docs/design.md, "Layout"). Plain
// structs of ids and integers, with no CAF: the CAF-free cores (model/) take and return them, and
// actors/messages.hpp gives them their inspect() overloads, type IDs and the actors' typed
// interfaces.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "model/messages/ids.hpp"

namespace kvtier {

// -- scheduler -> cache controller ----------------------------------------------------------------

/// PD decode instance: hold blocks for the first `tokens` tokens of a request whose KV comes
/// from elsewhere: its device prefix hits, then fresh private blocks (all or nothing).
struct preallocation {
  request_id req = 0;
  std::vector<cache_block> blocks;
  uint32_t tokens = 0;
};

struct preallocation_result {
  request_id req = 0;
  bool ok = false;
  uint32_t device_hit_blocks = 0;
  uint64_t device_hit_tokens = 0;
  uint32_t available_blocks = 0;
};

/// A request arrived with these prompt blocks. The controller looks for blocks the tiers lack in
/// storage and prefetches them into host memory; it answers with `ready` once they are there.
struct arrival {
  request_id req = 0;
  std::vector<cache_block> blocks;
  /// A preempted request near re-admission (scheduler.preemption=save_to_storage): `blocks` is
  /// empty, the controller looks up in storage what its tiers lost of the blocks it knows.
  bool readmission = false;
  /// Tokens its KV must cover before it samples (its prompt, and at a re-admission what it
  /// generated too): a full hit recomputes the block holding the last of them, so the storage
  /// lookup does not ask for that block (docs/design.md, "Hit ratio"). 0: not known (the live
  /// server's engines), every block is asked for.
  uint64_t target_tokens = 0;
};

struct ready {
  request_id req = 0;
  uint32_t prefetched_blocks = 0;  ///< blocks brought from storage to host for it
  /// Device blocks available now: a landed prefetch releases what it held, outside any step.
  uint32_t available_blocks = 0;
};

/// Before planning a step: how do these waiting requests match, how many device blocks could be
/// had, and (only if `grow_blocks` exceeds that) what would preempting each victim free.
struct probe {
  uint64_t step = 0;
  std::vector<request_id> candidates;  ///< waiting requests, first come first
  uint32_t grow_blocks = 0;            ///< blocks the running requests need this step
  std::vector<request_id> victims;     ///< running requests, preemption order (last admitted first)
};

struct candidate_match {
  request_id req = 0;
  uint32_t device_blocks = 0;
  uint32_t host_blocks = 0;
  uint64_t device_tokens = 0;
  uint64_t host_tokens = 0;
  /// Device hits no request holds: admitting takes them out of the available blocks too.
  uint32_t idle_device_blocks = 0;
  /// Blocks it had cached when it became ready that the tiers have lost since (storage may
  /// still hold them: the scheduler has it look them up again before admission).
  uint32_t lost_blocks = 0;
};

struct probe_reply {
  uint64_t step = 0;
  uint32_t available_blocks = 0;
  std::vector<candidate_match> matches;
  std::vector<uint32_t> victim_frees;  ///< blocks each victim would free, as far as needed
};

/// "Request `req` needs blocks for its first `tokens` tokens", or "has computed them".
struct token_mark {
  request_id req = 0;
  uint32_t tokens = 0;
};

/// All block work of one scheduler step, in the order the controller applies it.
struct commit {
  uint64_t step = 0;
  std::vector<token_mark> computed;   ///< KV now exists for these tokens: commit full blocks
  std::vector<request_id> finished;   ///< release all their blocks
  /// Release all their blocks; `tokens` have KV (what save_to_storage and swap_to_host save).
  std::vector<token_mark> preempted;
  std::vector<token_mark> grows;      ///< running requests: cover this many tokens
  std::vector<token_mark> admits;     ///< waiting requests to start, first come first
  /// A decode instance drops its victims (docs/fastdeploy.md §4): once their blocks are released
  /// (and saved, by scheduler.preemption) the controller forgets them.
  bool drop_preempted = false;
  /// The engine that owns the device tier dropped these blocks from its device (docs/protocol.md,
  /// version 3): applied after the releases, before grows and admits; no copy reads them.
  std::vector<block_hash> device_dropped;
  /// Version 3: the engine's device block ids of each `admits` entry (its whole block table) and
  /// each `grows` entry (the blocks added), in their order; empty lists elsewhere. The device
  /// copies of those blocks address the engine's ids (real mode writes the engine's tensors).
  std::vector<std::vector<uint32_t>> admit_blocks;
  std::vector<std::vector<uint32_t>> grow_blocks;
};

struct admit_result {
  request_id req = 0;
  bool admitted = false;
  uint32_t device_blocks = 0;   ///< hits per tier (storage: prefetched blocks now in host)
  uint32_t host_blocks = 0;
  uint32_t storage_blocks = 0;
  uint64_t device_tokens = 0;
  uint64_t host_tokens = 0;
  uint64_t storage_tokens = 0;
};

/// The answer to a commit, sent when the step's inputs are in device memory.
struct grant {
  uint64_t step = 0;
  std::vector<admit_result> admits;
  std::vector<request_id> failed_grows;  ///< running requests that got no blocks this step
  uint32_t available_blocks = 0;         ///< after this commit
  /// Per layer: when its swapped-in blocks were in place. Empty: no swap-in waited for.
  std::vector<int64_t> layer_ready_ns;
  /// When every copy that still read blocks this step reuses was done (0: none was waited for).
  /// Kept apart from the layers: such a wait holds back the whole step, on either backend, and
  /// is no swap-in's (docs/gpu.md, "The stall").
  int64_t reused_ready_ns = 0;
  /// Real backend: the grant comes before the step's swap-in lands; the step's compute waits for
  /// this transfer layer by layer on the device (0: none).
  uint64_t swap_in = 0;
  uint32_t swap_in_blocks = 0;  ///< how many blocks `swap_in` moves
  /// With commit::drop_preempted: per victim, in the commit's order, how many storage keys its
  /// save writes (`dropped_keys`, in block order), so the decode instance can wait until they
  /// are visible before the request goes back to the router.
  std::vector<uint32_t> dropped_key_counts;
  std::vector<uint64_t> dropped_keys;
};

}  // namespace kvtier
