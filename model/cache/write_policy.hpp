#pragma once

// Write policies decide when a device block gets a host copy and what eviction does with it
// (FastDeploy Cache Manager V1, docs/fastdeploy.md §2, with SGLang HiCache's thresholds):
//
//  write_through            back every committed block up to host (threshold forced to 1);
//  write_through_selective  back a block up once it has `threshold` hits: hit_count starts at 1
//                           for the request that computed it and grows by one per prefix match,
//                           so the default threshold 2 means "reused at least once";
//  write_back               copy to host only when the device copy is evicted.
//
// Backed-up blocks keep their host copy while on device (an inclusive host tier); evicting them
// from device is a metadata flip. A full host tier that has no host-only block to evict gives up
// the copy of its least recently used idle device block, which stays on the device
// (cache_model::allocate_host, docs/design.md "Write policies"). A swap-in keeps the host copy under the write-through policies
// and frees it under write_back (exclusive tiers, as FastDeploy does) unless
// keep_host_on_swap_in (SGLang HiCache's write_back keeps it). Backups go parent first, so under the
// write-through policies the host-resident blocks stay prefix-closed: a block never loses its
// device copy while host-only children hang below it without a host copy of its own.
//
// Storage writes (cache.storage_write) are a decision of their own, apart from the host policy
// (FastDeploy writes a finished request's blocks to storage whatever its host policy;
// docs/design.md "Storage writes"). Each block is stored once (tree_node::stored):
//
//  always                   store a block when its host copy becomes ready, and at the latest
//                           when a request holding it finishes;
//  write_through_selective  the same, once it has `storage_threshold` hits (SGLang HiCache's
//                           selective write-through applied to the L2 -> L3 write: a block computed
//                           once and never reused is not worth the pool's bandwidth); a hit that
//                           reaches the threshold stores a ready host copy at once;
//  on_host_evict            store a block when the host tier evicts it;
//  never                    store nothing.
//
// Stores read host memory (FastDeploy's are host-sourced too): a block due at finish without a
// host copy is staged, a D2H copy into a host block that is freed once the store has read it,
// unless the host policy wants the copy kept (cache_model::store_finished).

#include <cstdint>
#include <optional>
#include <string>

namespace kvtier {

enum class write_policy : uint8_t { write_through, write_through_selective, write_back };
enum class storage_write : uint8_t { always, on_host_evict, never, write_through_selective };

const char* to_string(write_policy p);
const char* to_string(storage_write s);
std::optional<write_policy> parse_write_policy(const std::string& text);
std::optional<storage_write> parse_storage_write(const std::string& text);

/// What device eviction does with a block.
enum class device_eviction { keep_host_copy, write_back, drop };

struct write_decisions {
  write_policy policy = write_policy::write_through_selective;
  uint32_t threshold = 2;  ///< hits before a backup; forced to 1 under write_through
  bool host_tier = false;  ///< a host tier exists
  storage_write storage = storage_write::never;
  bool storage_tier = false;
  /// write_back only. FastDeploy frees the host copy of a swapped-in block, so every later
  /// device eviction writes it back again (a block cycling between host and device moves its
  /// bytes D2H once per cycle); SGLang HiCache keeps it, so a block is written back once.
  bool keep_host_on_swap_in = false;
  uint32_t storage_threshold = 2;  ///< storage write_through_selective: hits before a store

  write_decisions() = default;
  write_decisions(write_policy p, uint32_t threshold, bool host_tier, storage_write s,
                  bool storage_tier, bool keep_host_on_swap_in = false,
                  uint32_t storage_threshold = 2);

  /// Whether a ready, committed device block with `hit_count` hits and no host copy should be
  /// backed up now.
  bool wants_backup(uint32_t hit_count) const;
  /// What evicting a device block does, given whether it has a host copy (ready or filling).
  device_eviction on_device_evict(bool has_host_copy) const;
  /// Whether the host copy stays after a swap-in to device.
  bool keeps_host_copy_after_swap_in() const;
  /// Whether a block with `hit_count` hits is stored when its host copy becomes ready.
  bool stores_when_host_ready(uint32_t hit_count) const;
  /// Whether a hit that brought a block with a ready host copy to `hit_count` hits stores it now
  /// (write_through_selective: the hit that reaches the threshold).
  bool stores_on_hit(uint32_t hit_count) const;
  /// Whether a held block with `hit_count` hits is stored when a request holding it finishes
  /// (unless it was stored before).
  bool stores_at_finish(uint32_t hit_count) const;
  /// Whether a block is stored when the host tier evicts it.
  bool stores_on_host_evict() const;
};

}  // namespace kvtier
