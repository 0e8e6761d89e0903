#pragma once

// The tiered cache model: the block index (radix_tree) over a device and a host block pool, with
// the write policy's decisions applied. It owns no clock and moves no bytes: every copy it wants
// is returned as a transfer_order, with its blocks already pinned and its target copy marked
// filling; whoever performs the copy (the transfer engine, or the hit-rate replay at once) calls
// complete() afterwards. The same model therefore serves the instant hit-rate replay and the
// timed replay, and can be tested without actors.
//
// Ownership of device blocks: a block is owned by a node (its device copy), by the caller
// ("private": allocated for a request and not adopted by a node), or retired (released while a
// transfer still touches it). Host blocks are owned by nodes only. Conservation per pool:
//   free + retired + private + node-owned == capacity.
//
// The life of a request's block, as the controller drives it:
//   match()            -> leading device hits, then host hits (ready copies only)
//   acquire_matched()  -> hold them (ref+1, hit+1)
//   allocate_device()  -> private blocks, evicting device leaves (and applying the write policy)
//   swap_in()          -> a host hit gets one of them; H2D order
//   begin_load()       -> a block found in storage gets a host copy; storage->host order
//   commit()           -> a computed block joins the tree (or stays private if a copy exists)
//   store_finished()   -> at a request's finish, the storage decision; store orders
//   release()          -> unreferenced blocks become evictable once they are leaves
//   collect_backups()  -> write-through copies of committed blocks; D2H orders

#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>

#include "core/block_hash.hpp"
#include "core/transfer_kind.hpp"
#include "model/cache/block_pool.hpp"
#include "model/cache/outstanding_orders.hpp"
#include "model/cache/radix_tree.hpp"
#include "model/cache/write_policy.hpp"

namespace kvtier {

/// Whether requests reuse cached prefixes at all (cache.prefix_caching). Off, nothing matches in
/// any tier and nothing is copied below the device: every prompt token is computed, the baseline
/// engines run without prefix caching.
enum class prefix_caching : uint8_t { on, off };

/// Whether the write policy backs up (and then stores) the blocks a request commits or hits. A
/// decode instance's prompt blocks came from its prefill instance, whose own write policy backs
/// them up and stores them: copying them again would move each byte over the links twice
/// (docs/cluster.md, "Prefill/decode disaggregation").
enum class policy_backups : uint8_t { by_policy, none };

struct cache_options {
  uint32_t device_blocks = 0;
  uint32_t host_blocks = 0;  ///< 0: no host tier
  eviction_policy eviction = eviction_policy::lru;
  write_policy policy = write_policy::write_through_selective;
  uint32_t write_through_threshold = 2;
  storage_write storage = storage_write::never;
  bool storage_tier = false;
  bool write_back_keeps_host_copy = false;  ///< see write_decisions::keep_host_on_swap_in
  uint32_t storage_write_threshold = 2;     ///< storage write_through_selective: hits first
  prefix_caching caching = prefix_caching::on;
};

/// A copy the model wants done. Its blocks are pinned from issue to complete(). A destination
/// block may still be pinned by an earlier order (a reader of its previous content): the copy
/// must not write it before those earlier orders complete. Completing orders in issue order
/// always satisfies this.
struct transfer_order {
  uint64_t id = 0;
  transfer_kind kind = transfer_kind::backup;
  node_id node = root_node;
  uint32_t generation = 0;
  block_hash hash = 0;
  uint32_t tokens = 0;
  block_id device_block = 0;  ///< backup, write_back: source; swap_in: destination
  block_id host_block = 0;    ///< backup, write_back, load: destination; swap_in, store: source
};

struct prefix_match {
  std::vector<node_id> nodes;  ///< the matched path: device hits, then host hits
  uint32_t device = 0;         ///< leading nodes with a ready device copy
  uint32_t host = 0;           ///< following nodes with a ready host copy only
  /// Device hits that count in device_available(): holding them takes them out of it.
  uint32_t device_idle = 0;
  uint64_t device_tokens = 0;
  uint64_t host_tokens = 0;
};

struct commit_result {
  node_id node = root_node;
  bool adopted = false;  ///< the node took the caller's block; else it stays private
};

struct cache_counters {
  uint64_t device_evictions = 0;
  uint64_t host_evictions = 0;
  uint64_t host_copies_evicted = 0;  ///< of those, copies of device blocks the device kept
  uint64_t dropped = 0;           ///< blocks that left every tier through eviction
  uint64_t backups = 0;
  uint64_t backups_skipped = 0;   ///< wanted, but the host tier had no room
  uint64_t write_backs = 0;
  uint64_t swap_ins = 0;
  uint64_t loads = 0;
  uint64_t stores = 0;
  uint64_t preemption_backups = 0;  ///< D2H copies a preemption asked for (swap or save)
  uint64_t preemption_stores = 0;   ///< stores a preemption asked for (save_to_storage)
  uint64_t staged_stores = 0;       ///< stores at finish that staged a D2H copy first
  uint64_t finish_stores_skipped = 0;  ///< stores due at finish without host room to stage
  uint64_t engine_drops = 0;  ///< device copies the engine owning the device tier dropped
};

class cache_model {
 public:
  explicit cache_model(const cache_options& options);

  // -- observers ------------------------------------------------------------------------------

  const radix_tree& tree() const { return tree_; }
  const block_pool& pool(tier t) const { return t == tier::device ? device_ : host_; }
  const cache_options& options() const { return options_; }
  const write_decisions& decisions() const { return decisions_; }
  const cache_counters& counters() const { return counters_; }
  uint32_t private_device_blocks() const { return private_device_; }
  /// Orders handed out and not yet completed.
  const outstanding_orders<transfer_order>& outstanding() const { return outstanding_; }
  /// Device blocks allocate_device() could hand out now.
  uint32_t device_available() const;
  /// Host blocks allocate_host could hand out now: free, retired, host-only leaves' and the
  /// copies of idle device blocks (T6).
  uint64_t host_room() const;

  // -- matching and holding -------------------------------------------------------------------

  /// Longest prefix of `blocks` with ready copies: device copies first, then host-only ones.
  void match(const cache_block* blocks, size_t n, prefix_match& out) const;
  /// Holds matched nodes for a request: ref+1 and hit+1 each.
  void acquire_matched(const node_id* nodes, size_t n,
                       policy_backups backups = policy_backups::by_policy);
  /// Counts a hit on nodes the caller holds already (blocks a request loaded from storage for
  /// itself, which its match would have held: the timed replay's admission matches them).
  void count_hits(const node_id* nodes, size_t n);
  /// Holds nodes without counting a hit (a storage prefetch protecting the prefix it loads under,
  /// a preempted request's re-admission finding its own blocks).
  void hold(const node_id* nodes, size_t n);
  /// Drops one hold on each node, in the order given.
  void release(const node_id* nodes, size_t n);
  /// Drops one hold on each node, last first (a path's tail before its head).
  void release_from_tail(const std::vector<node_id>& path);

  // -- device blocks --------------------------------------------------------------------------

  /// Appends `n` private device blocks to `out`, evicting device leaves as needed; all or
  /// nothing. A block may be one whose previous owner's D2H is still reading it: its pins()
  /// in pool(tier::device) say so, and the caller must wait for them before writing.
  bool allocate_device(uint32_t n, std::vector<block_id>& out,
                       std::vector<transfer_order>& orders);
  /// Returns a private device block.
  void free_device(block_id block);

  // -- copies ---------------------------------------------------------------------------------

  /// A held host-only node starts loading into the caller's private `device_block`.
  void swap_in(node_id node, block_id device_block, std::vector<transfer_order>& orders);
  /// A computed block joins the tree under `parent` (which must have a device copy) and is
  /// held for the caller. The node adopts `device_block` unless it already has a device copy.
  commit_result commit(node_id parent, const cache_block& block, block_id device_block,
                       std::vector<transfer_order>& orders,
                       policy_backups backups = policy_backups::by_policy);
  /// A block found in storage gets a new node under `parent` with a host copy being filled, held
  /// for the caller; nullopt if the hash already has a node or the host tier has no room.
  std::optional<node_id> begin_load(node_id parent, const cache_block& block,
                                    std::vector<transfer_order>& orders);
  /// A block computed without device room to keep it (a prompt longer than the device tier, in
  /// the hit-rate replay) passes through the device and leaves it at once: it gets a host-only
  /// node under `parent`, held for the caller, if the write policy gives a block leaving the
  /// device with one hit a host copy (write_through, write_back). The copy is ready at once (the
  /// replay has no clock); a store follows as for any host copy. Without this a smaller device
  /// would keep such blocks out of the host tier, and a larger one let them in: a larger device
  /// could lower the hit ratio (docs/design.md, "Hit ratio"). nullopt if the policy keeps no
  /// copy, the hash already has a node, or the host tier has no room. `found`: the request's
  /// match found the block (a full hit's last block, in storage), so it has a second hit.
  std::optional<node_id> pass_through_device(node_id parent, const cache_block& block,
                                             std::vector<transfer_order>& orders,
                                             bool found = false);
  /// Starts the write-through backups that are due (parents first).
  void collect_backups(std::vector<transfer_order>& orders);
  /// Backups queued and not yet collected.
  size_t backups_queued() const { return backup_queue_.size(); }
  /// The backups queued from `from` on go before those queued from `mark` on: commits made
  /// after holds the step made later keep the order the step would have given their backups.
  void queue_backups_before(size_t mark, size_t from) {
    KVTIER_ASSERT(mark <= from && from <= backup_queue_.size());
    std::rotate(backup_queue_.begin() + static_cast<long>(mark),
                backup_queue_.begin() + static_cast<long>(from), backup_queue_.end());
  }
  /// Whether a backup collect_backups could start now reads a device block `reads` accepts:
  /// the queued blocks, and the held blocks below them (queued as their parents' backups
  /// start). A superset of what it starts: the hit counts' wishes are not asked.
  template <class Reads>
  bool any_backup_reads(Reads reads) const {
    backup_scan_.clear();
    backup_seen_.clear();
    for (auto [id, generation] : backup_queue_)
      if (tree_.node(id).live() && tree_.node(id).generation == generation)
        backup_scan_.push_back(id);
    while (!backup_scan_.empty()) {
      node_id id = backup_scan_.back();
      backup_scan_.pop_back();
      const tree_node& x = tree_.node(id);
      if (!x.ready(tier::device) || x.has(tier::host) || !backup_seen_.insert(id).second)
        continue;
      if (reads(x.block_in(tier::device)))
        return true;
      tree_.for_each_child(id, [&](node_id c) {
        if (tree_.node(c).ref_count > 0)
          backup_scan_.push_back(c);
      });
    }
    return false;
  }
  /// A preempted request's computed block (held by it, device copy ready) gets a host copy if it
  /// has none, evicting host leaves as needed (D2H); with `store`, it is then written from host
  /// to storage. Returns false if the host tier had no room for it.
  /// `writes`, if given, is set when a store of the block is issued or follows its copy now
  /// (not when an earlier store is relied on).
  bool save_for_preemption(node_id id, bool store, std::vector<transfer_order>& orders,
                           bool* writes = nullptr);
  /// A request holding `nodes` (its path, prefix order) finishes: the storage decision stores
  /// each block it wants that was not stored before (write_policy.hpp). A block without a host
  /// copy is staged through a host block first; when the host tier has no room, it and the
  /// rest of the path are not stored.
  void store_finished(const node_id* nodes, size_t n, std::vector<transfer_order>& orders);
  /// Settles an order: unpins its blocks and marks its target copy ready (if the node still
  /// exists). May emit follow-up orders (a store after a host copy became ready).
  void complete(const transfer_order& order, std::vector<transfer_order>& orders);

  /// Starts loading what complete(order) will touch (its node and its blocks' pool entries):
  /// a transfer's orders are completed in a batch, the next few prefetched.
  void prefetch(const transfer_order& order) const {
    tree_.prefetch_node(order.node);
    device_.prefetch(order.device_block);
    host_.prefetch(order.host_block);
  }

  /// An order that could not be carried out (a load whose block storage evicted since it was
  /// found): unpins its blocks and drops the copy it was filling.
  void fail(const transfer_order& order);
  /// Removes node `id` (if it is still that node) once it has no copy, no holder and no child:
  /// what a failed load leaves behind.
  void discard_if_bare(node_id id, uint32_t generation);

  /// The engine that owns the device tier dropped the block named `hash` (docs/protocol.md,
  /// version 3): its device copy, and its descendants', leave without a write-back; a host copy
  /// stays. Nothing happens when a request holds one of them. Returns the copies dropped.
  uint32_t drop_device_copy(block_hash hash, std::vector<transfer_order>& orders);

  /// Empties everything; requires no outstanding orders.
  void reset();

  /// Tells `sink` of each block that becomes ready in a tier or leaves it (radix_tree).
  void set_event_sink(block_event_sink* sink) { tree_.set_event_sink(sink); }
  /// Makes room for `nodes` tree nodes up front (radix_tree::reserve).
  void reserve_nodes(uint32_t nodes) { tree_.reserve(nodes); }

 private:
  bool allocate_host(uint32_t n, std::vector<block_id>& out,
                     std::vector<transfer_order>& orders);
  void evict_device_node(node_id id, bool may_write_back, std::vector<transfer_order>& orders);
  void plan_write_backs();
  void issue_store(node_id id, block_id host_block, std::vector<transfer_order>& orders);
  void free_staged_copy(const transfer_order& store);
  void evict_host_node(node_id id, std::vector<transfer_order>& orders);
  void evict_host_copy(node_id id, std::vector<transfer_order>& orders);
  void drop_subtree(node_id id);
  void maybe_queue_backup(node_id id);
  void queue_for_hit(node_id id);
  transfer_order& issue(transfer_kind kind, node_id node, block_id device_block,
                        block_id host_block, std::vector<transfer_order>& orders);

  cache_options options_;
  write_decisions decisions_;
  radix_tree tree_;
  block_pool device_;
  block_pool host_;
  uint32_t private_device_ = 0;
  cache_counters counters_;
  std::vector<std::pair<node_id, uint32_t>> backup_queue_;  // (node, generation)
  std::vector<std::pair<node_id, uint32_t>> store_queue_;   // hits that earned a store
  mutable std::vector<node_id> backup_scan_;                 // scratch of any_backup_reads
  mutable absl::flat_hash_set<node_id> backup_seen_;         // scratch of any_backup_reads
  // Host copies still filling that are stored once ready (order id -> who asked): preemption
  // saves, and stores at finish, which may have staged the copy for the store alone.
  enum class store_reason : uint8_t { preemption, finish, staging };
  absl::flat_hash_map<uint64_t, store_reason> store_after_fill_;
  // Stores reading a staged copy (order ids): the copy goes when they complete.
  absl::flat_hash_set<uint64_t> staging_stores_;
  outstanding_orders<transfer_order> outstanding_;
  uint64_t next_order_id_ = 1;
  std::vector<node_id> victims_;  // scratch
  std::vector<uint8_t> write_back_;  // victims_[i] may be written back (plan_write_backs)
  std::vector<node_id> host_victims_;
  std::vector<node_id> subtree_stack_;
  std::vector<node_id> subtree_order_;
  std::vector<block_id> blocks_;  // scratch
};

}  // namespace kvtier
