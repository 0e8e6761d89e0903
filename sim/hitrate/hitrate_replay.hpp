#pragma once

// The hit-rate replay: requests in arrival order through the cache model, without timing. At its
// arrival a request matches the longest cached prefix over the tiers (device, then host, then
// storage) and the hits are counted per tier; then every block of the request is placed on the
// device (host hits swapped in, storage hits loaded through host, misses computed) and released.
// Transfers complete at once. The write policy, evictions and storage writes all happen as in
// the timed replay, only without clocks.
//
// Definition: hit ratio (blocks) = prompt blocks found as a contiguous cached prefix at arrival /
// all prompt blocks; hit ratio (tokens) = the tokens of those blocks / all prompt tokens. Only
// full blocks are named (core/block_hash.hpp); prompt tokens that no block covers (a partial
// last block, the tail agentic traces leave unlisted) count only in the token total.
// Touch order within a request does not matter: eviction takes leaves only, so a request's
// blocks always leave tail first.

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "model/cache/cache_model.hpp"
#include "model/cache/invariants.hpp"
#include "model/storage/storage_index.hpp"
#include "runtime/config/replay_config.hpp"
#include "core/tier.hpp"
#include "core/trace_request.hpp"

namespace kvtier {

/// Refuses (config_error, naming the key) a config the hit-rate replay cannot honour: several
/// instances or one with overrides (`cluster.instances`: it replays one instance's tiers),
/// and `cache.output_caching` (it generates no output tokens). It would otherwise replay the
/// default instance and still record the keys in summary.json.
void refuse_unreplayed_keys(const config& c);

/// What happened to one request.
struct request_outcome {
  uint32_t blocks = 0;
  per_tier<uint32_t> hit_blocks{};
  per_tier<uint64_t> hit_tokens{};
  uint32_t uncached_blocks = 0;  ///< blocks that did not fit on the device at all
};

struct hitrate_totals {
  uint64_t requests = 0;
  uint64_t blocks = 0;
  uint64_t input_tokens = 0;
  uint64_t output_tokens = 0;
  per_tier<uint64_t> hit_blocks{};
  per_tier<uint64_t> hit_tokens{};
  uint64_t uncached_blocks = 0;
  uint64_t lookups = 0;          ///< block lookups (tree matching, storage probes)
  uint64_t inserts = 0;          ///< blocks placed on the device (new, swapped in, loaded)
  uint64_t host_inserts = 0;     ///< host copies made (backups, write-backs, storage loads)
  uint64_t storage_inserts = 0;  ///< blocks written to storage

  /// Every block lookup and every block insert into any tier.
  uint64_t operations() const { return lookups + inserts + host_inserts + storage_inserts; }
};

class hitrate_replay {
 public:
  /// `check_every`: run the invariant checker after every this many requests (0: at the end
  /// only).
  hitrate_replay(const replay_config& config, uint64_t check_every);

  void process(const trace_request& r, const std::vector<cache_block>& blocks,
               request_outcome& out);
  /// Final invariant check; returns every check run so far.
  const invariant_report& finish();

  const hitrate_totals& totals() const { return totals_; }
  const cache_model& model() const { return model_; }
  const storage_index* storage() const { return storage_.get(); }
  const invariant_report& invariants() const { return invariants_; }
  uint64_t invariant_passes() const { return passes_; }

 private:
  void drain();
  /// Appends `n` device blocks to fresh_, write-backs drained chunk by chunk (see the .cpp).
  void allocate_in_host_sized_chunks(uint32_t n);
  /// Storage hits after the tree's: see the .cpp.
  uint32_t storage_run(const std::vector<cache_block>& blocks, uint32_t from);
  uint32_t match_at_arrival(const trace_request& r, const std::vector<cache_block>& blocks);
  uint32_t make_device_room(const std::vector<cache_block>& blocks, request_outcome& out);
  uint32_t load_from_storage(const std::vector<cache_block>& blocks, uint32_t in_storage);
  void count_hits(const trace_request& r, const std::vector<cache_block>& blocks, uint32_t loaded,
                  request_outcome& out);
  uint32_t place_on_device(const std::vector<cache_block>& blocks, uint32_t placed,
                           uint32_t loaded);
  void pass_through_device(const std::vector<cache_block>& blocks, uint32_t end);
  void finish_request();
  void uncount_recomputed_hit(const trace_request& r, const std::vector<cache_block>& blocks,
                              request_outcome& out);
  storage_key key_of(block_hash h) const {
    return make_storage_key(config_.storage_namespace, h);
  }

  replay_config config_;
  uint64_t check_every_;
  cache_model model_;
  std::unique_ptr<storage_index> storage_;
  hitrate_totals totals_;
  invariant_report invariants_;
  uint64_t passes_ = 0;
  // scratch, reused across requests
  prefix_match match_;
  std::vector<transfer_order> orders_;
  std::vector<block_id> fresh_;
  std::vector<node_id> path_;
  std::vector<storage_key> keys_;  // the request's storage keys, made as the probe reaches them
  // drain(): the storage keys of stores made ahead, by order number (orders drained before
  // this drain's first, plus its index).
  struct key_ahead {
    uint64_t order = UINT64_MAX;
    storage_key key = 0;
  };
  std::array<key_ahead, 16> keys_ahead_;
  uint64_t drained_ = 0;
  bool host_last_computed_ = false;  // a full hit ends in host: its last block is computed
  // A full hit ends in storage and every storage hit before its last block was loaded: the
  // last block, computed, was found by the match and counts a hit (docs/design.md, step 5).
  bool storage_last_found_ = false;
};

}  // namespace kvtier
