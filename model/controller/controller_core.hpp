#pragma once

// The cache controller's logic without the actor: it owns the cache model and every request's
// blocks, applies the scheduler's step commits, and turns the model's transfer orders into
// transfers. The actor (cache_controller.hpp) only moves messages in and out.
//
// A request's blocks, in order: the listed prompt blocks (hits are the tree's nodes; misses are
// private blocks until computed, then committed into the tree), then private blocks for the rest.
// The request holds (refs) every tree node of its path, so its prefix can't be evicted under it.
//
// Storage prefetch happens at arrival, as FastDeploy's and SGLang's do: the blocks right after the
// tree's match that storage holds (longest leading run, one batch exists) are loaded into host
// memory and counted as storage hits when the request is admitted. The request is ready for the
// scheduler when they have landed. The prefix above them is held only while they load: holding
// it until admission would let a long queue pin the whole device pool while nothing runs (a
// deadlock); released, the loaded blocks are the newest in the host tier, and evicted before
// their request is admitted only under host pressure, as in FastDeploy.
// Storage is asked again just before admission when the tiers lost part of what the request had
// cached at readiness (a probe reports `lost_blocks`; docs/design.md, "The timed replay"): a
// queued request would otherwise compute what was evicted to storage while it waited. Such a
// lookup's loads are held until the admission, which is imminent (the request heads the queue).
//
// Invariants (check(), besides the model's): every node's ref count equals the holds of the
// requests on it; private device blocks equal what the requests own; a step starts computing into
// new blocks only once no transfer touches them.

#include <cstdint>
#include <optional>
#include <vector>

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>

#include "model/cache/cache_model.hpp"
#include "model/cache/invariants.hpp"
#include "model/controller/transfer_tracker.hpp"
#include "model/scheduler/preemption.hpp"
#include "model/messages.hpp"
#include "model/request_layout.hpp"
#include "core/run_modes.hpp"
#include "core/sim_clock.hpp"

namespace kvtier {

struct controller_options {
  uint32_t block_size = 64;
  uint64_t storage_namespace = 0;
  bool storage = false;
  uint64_t check_every = 0;  ///< run every invariant check after this many commits (0: never)
  uint32_t layers = 1;       ///< model layers (grants give a ready time per layer)
  /// Real backend: grant a step before its swap-in lands (the GPU orders compute after it layer
  /// by layer); copies still reading reused blocks are waited for all the same.
  bool grant_early = false;
  tree_work_timing tree_work = tree_work_timing::in_step;
  bool verify = false;       ///< mark each computed block with its pattern (a fill transfer)
  bool log = false;          ///< record which requests each swap-in served
  /// What a preempted request's blocks become (preemption.hpp).
  preemption_mode preemption = preemption_mode::recompute;
  /// Storage prefetch: when its request may be scheduled, the shortest match worth loading, the
  /// timeout policy's deadline (base plus an allowance per 1024 tokens loaded), and how many
  /// blocks landed prefetches may hold until their requests are admitted (0: none).
  prefetch_policy prefetch = prefetch_policy::wait_complete;
  uint64_t prefetch_threshold_tokens = 0;
  int64_t prefetch_timeout_ns = 1'000'000'000;
  int64_t prefetch_timeout_per_ki_token_ns = 250'000'000;
  uint32_t prefetch_capacity_blocks = 0;
  sim_clock clock;           ///< the actor's timers (the timeout policy)
  /// Hears every block that becomes ready in a tier or leaves it, one batch per message handled
  /// (KV events, docs/events.md); null: nobody (the default). Must outlive the controller.
  block_event_sink* events = nullptr;
};

/// What a commit needs from transfers before the step may compute.
struct step_inputs {
  uint64_t swap_in = 0;                 ///< the step's swap-in transfer, 0 if none
  uint32_t swap_in_blocks = 0;          ///< the blocks it moves
  std::vector<uint64_t> barriers;       ///< transfers still touching blocks the step writes
  std::vector<block_id> written;        ///< device blocks the step computes into
};

class controller_core {
 public:
  controller_core(const cache_options& cache, const controller_options& options);

  // -- routing (controller_core.cpp) -----------------------------------------------------------

  /// The prefix of `blocks` held now (ready device copies, then host copies); takes nothing.
  prefix_hit lookup(const std::vector<cache_block>& blocks);

  // -- arrival and storage prefetch (controller_arrival.cpp) -----------------------------------

  /// Registers a request; returns the storage keys of the blocks past the tree's match (empty:
  /// nothing to look up, the request is ready).
  std::vector<uint64_t> on_arrival(request_id req, std::vector<cache_block> blocks,
                                   uint64_t target_tokens = 0);
  /// A preempted request nears re-admission: the storage keys of its blocks past the tree's match
  /// (save_to_storage wrote them when it was preempted).
  std::vector<uint64_t> on_readmission(request_id req, uint64_t target_tokens = 0);
  /// Storage holds the first `leading` of those keys: loads them (a transfer in `out`) and holds
  /// them; returns false if nothing loads (the request is ready at once).
  bool on_exists(request_id req, uint32_t leading, std::vector<transfer>& out);
  /// Tokens a request's prefetch is loading (the timeout policy's allowance).
  uint64_t prefetch_tokens(request_id req) const;
  /// The actor made a request ready before its loads landed (best_effort, timeout).
  void note_ready_early(bool by_timeout);

  // -- PD decode instance (controller_preallocate.cpp) -----------------------------------------

  /// Holds blocks for a request whose KV is computed elsewhere: its leading device hits, then
  /// fresh private blocks up to `p.tokens` (all or nothing). The request counts as admitted; the
  /// scheduler commits its blocks as computed once the KV has arrived. Evictions it causes
  /// append transfers to `out`.
  preallocation_result preallocate(const preallocation& p, std::vector<transfer>& out);

  // -- steps (controller_admission.cpp, controller_commit.cpp) ---------------------------------

  probe_reply on_probe(const probe& p);
  /// Applies a commit: fills `g` (all but layer times), appends transfers to send, and says what
  /// the step must wait for.
  void on_commit(const commit& c, grant& g, std::vector<transfer>& out, step_inputs& inputs);
  /// The tree work the last commit left for after its reply (options.tree_work), if any: its
  /// commits, then its backups, whose copies go to `out`. The next commit, a report and a grant
  /// that waits for copies do it first where this did not come before them.
  void collect_deferred_work(std::vector<transfer>& out);
  /// Commits whose computed blocks joined the tree after their reply (options.tree_work).
  uint64_t commits_after_reply() const { return commits_after_reply_; }
  /// Checks, when a step is about to compute, that nothing still reads or writes its new blocks,
  /// and the reuse barrier: no block a preemption save still reads is computed into.
  void check_step_start(const step_inputs& inputs);
  /// Device blocks that preemption saves are reading now, with the order reading each.
  const absl::flat_hash_map<block_id, uint64_t>& preemption_reads() const {
    return preemption_reads_;
  }
  /// Tests corrupt the ledger through this, to show that its check fires.
  absl::flat_hash_map<block_id, uint64_t>& preemption_reads_for_test() { return preemption_reads_; }

  // -- transfers (controller_transfers.cpp) ----------------------------------------------------

  /// A transfer finished: settles its orders, appends follow-ups (stores after backups) to `out`,
  /// and names requests whose prefetch has now landed.
  void on_transfer_done(const transfer_done& d, std::vector<transfer>& out,
                        std::vector<request_id>& landed);
  /// Prefetches that failed because storage evicted a block before it was read.
  uint64_t failed_loads() const { return failed_loads_; }
  /// Blocks a request got from storage (0 once admitted).
  uint32_t prefetched(request_id req) const { return requests_.at(req).prefetched; }

  /// Tells `sink` of each block that becomes ready in the device or host tier, or leaves it
  /// (KV events); none by default (controller_options::events sets it at construction).
  void set_event_sink(block_event_sink* sink) {
    options_.events = sink;
    model_.set_event_sink(sink);
  }

  // -- observers (controller_invariants.cpp, controller_core.cpp) ------------------------------

  const cache_model& model() const { return model_; }
  const controller_options& options() const { return options_; }
  /// No request holds blocks and no transfer is outstanding.
  bool idle() const { return requests_.empty() && tracker_.outstanding_count() == 0; }
  /// Every invariant, now; `quiescent` at the end of a replay.
  void check(bool quiescent);
  controller_report report() const;

 private:
  struct request_state {
    std::vector<cache_block> blocks;
    request_layout layout;
    std::vector<node_id> path;            // held nodes, prefix order
    std::vector<block_id> table;          // device block of each covered block
    std::vector<uint8_t> owned;           // table[i] is private to the request
    uint32_t committed = 0;               // listed blocks in `path`
    uint32_t probed_from = 0;             // first block the storage lookup asked about
    std::vector<node_id> prefetch_path;   // held while a storage prefetch loads (prefix and loads)
    uint32_t prefetch_first = 0;          // listed blocks [prefetch_first, +prefetched) were loaded
    uint32_t prefetched = 0;
    uint64_t load_transfer = 0;
    bool admitted = false;
    bool protected_hold = false;          // prefetch_path held past landing, until admission
    bool preempted = false;               // admitted before: its next admission is a re-admission
    policy_backups backups = policy_backups::by_policy;  // none: preallocated for a handoff
    // Listed blocks loaded from storage for it since its last admission (storage hits if still
    // cached then, else wasted), and how many blocks it had cached when it became ready.
    std::vector<uint8_t> loaded;
    uint32_t cached_at_ready = 0;
    uint64_t target_tokens = 0;  // arrival::target_tokens
    bool lookup_before_admission = false;  // its prefetch was looked up at the queue's head
  };
  /// Loaded blocks of `r` not among its first `hits` blocks (or all of them): wasted.
  void count_wasted_loads(request_state& r, uint32_t hits);
  void release(request_state& r);
  /// Matches `r` in the tree and returns the storage keys of its blocks past the match, the
  /// ones to ask storage for (counted as a probe when there are any).
  std::vector<uint64_t> storage_keys_past_match(request_state& r);
  /// Counts what a save of `x` adds over the write policy (preemption_io's marginal_*).
  void count_marginal(const tree_node& x, bool copied, bool stored, bool named);
  /// `written`, if given, gets the storage keys its save writes, in block order.
  void preempt(request_id id, uint32_t computed_tokens, std::vector<transfer_order>& orders,
               std::vector<uint64_t>* written = nullptr);
  void drop_prefetch_hold(request_state& r);
  void release_protected_if_idle();
  bool admit(request_id id, const token_mark& m, admit_result& res,
             std::vector<transfer_order>& orders, step_inputs& inputs);
  bool grow(request_state& r, uint32_t tokens, std::vector<transfer_order>& orders,
            step_inputs& inputs);
  void commit_computed(request_state& r, uint32_t tokens, std::vector<transfer_order>& orders);
  // A commit's parts, in on_commit's order (controller_commit.cpp).
  void commit_finished(const commit& c, std::vector<transfer_order>& orders);
  void commit_preempted(const commit& c, grant& g, std::vector<transfer_order>& orders);
  void commit_grows_and_admits(const commit& c, grant& g, std::vector<transfer_order>& orders,
                               step_inputs& inputs);
  void take_deferred_work(std::vector<transfer>& out);
  bool commits_wait_for_reply(const commit& c) const;
  void catch_up_commits(std::vector<transfer_order>& orders);
  bool backups_wait_for_reply() const;
  /// The step's transfers (fills, then the batched orders) into `out`, and what it waits for.
  void commit_transfers(const grant& g, std::vector<transfer_order>& orders,
                        std::vector<transfer>& out, step_inputs& inputs);
  uint32_t victim_frees(const request_state& r) const;
  void note_written(const std::vector<block_id>& blocks, step_inputs& inputs) const;
  /// Version 3: the engine's ids of `r`'s table from position `from` on.
  void note_engine_blocks(const request_state& r, const std::vector<uint32_t>& ids, size_t from);
  /// Version 3 (docs/protocol.md): moves a commit's transfers, `out` from `first` on, onto the
  /// engine's block ids; unchanged where no commit named any (versions 1 and 2, replays). Adds
  /// to `barriers` the copies still reading ids the commit named again
  /// (controller_engine_blocks.cpp).
  void to_engine_blocks(std::vector<transfer>& out, size_t first,
                        std::vector<uint64_t>& barriers);
  void order_engine_reads(std::vector<transfer>& out, size_t first);
  void hold_fresh_reads(std::vector<transfer>& out, size_t first,
                        const std::vector<uint64_t>& fresh_reads);
  void claim_engine_blocks(transfer& t);
  /// A transfer ended: its engine blocks are free of it.
  void forget_engine_claims(uint64_t transfer);

  cache_model model_;
  controller_options options_;
  transfer_tracker tracker_;
  absl::flat_hash_map<request_id, request_state> requests_;
  absl::flat_hash_map<uint64_t, request_id> load_owner_;
  std::vector<block_move> produced_;  // --verify: blocks computed since the last commit
  std::vector<swap_in_log> swap_in_log_;
  invariant_report invariants_;
  uint64_t commits_ = 0;
  uint64_t storage_probes_ = 0;
  uint64_t failed_loads_ = 0;
  preemption_io preemption_;
  prefetch_stats prefetch_;
  uint32_t protected_blocks_ = 0;  // blocks held by protected prefetches
  uint32_t admitted_ = 0;          // requests admitted (running)
  // The reuse barrier: device block -> the preemption save (order) reading it.
  absl::flat_hash_map<block_id, uint64_t> preemption_reads_;
  // Version 3: the engine's id of each device block a commit named one for (empty: none named).
  std::vector<uint32_t> engine_blocks_;
  // What this commit's admissions replaced: copies reading a block read its old contents.
  absl::flat_hash_map<block_id, uint32_t> engine_blocks_before_;
  // The engine's ids this commit's admissions and growths named.
  std::vector<uint32_t> engine_named_;
  // The engine's ids its step computes into: those named, and the blocks growths fill up.
  absl::flat_hash_set<uint32_t> engine_written_;
  // Real mode: reads of what the last step computed, sent with the next commit.
  std::vector<transfer> engine_held_;
  // The copies in flight on each engine block, and the engine blocks each copy claims.
  struct engine_users {
    uint64_t writer = 0;
    std::vector<uint64_t> readers;
  };
  absl::flat_hash_map<uint32_t, engine_users> engine_users_;
  absl::flat_hash_map<uint64_t, std::vector<uint32_t>> engine_touched_;
  // scratch
  prefix_match match_;
  std::vector<block_id> fresh_;
  std::vector<transfer_order> follow_orders_;  // scratch: a transfer's follow-up orders
  // A step's orders: a step of hundreds of blocks would regrow a fresh vector a dozen times.
  std::vector<transfer_order> step_orders_;
  // After the reply (options.tree_work): the last commit's computed requests, whose blocks join
  // the tree once its grant went out, and where its backups' queue stood when they would have.
  std::vector<token_mark> deferred_commits_;
  size_t deferred_commits_mark_ = 0;
  uint64_t commits_after_reply_ = 0;
  bool tree_work_deferred_ = false;  ///< the last commit's backups wait for collect_deferred_work
};

}  // namespace kvtier
