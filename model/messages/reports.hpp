#pragma once

// The end-of-run reports the replay driver reads (docs/design.md, "Layout"). Plain structs of ids
// and integers, with no CAF: the CAF-free cores (model/) take and return them, and
// actors/messages.hpp gives them their inspect() overloads, type IDs and the actors' typed
// interfaces.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/tier.hpp"
#include "core/transfer_kind.hpp"
#include "model/messages/ids.hpp"
#include "model/messages/transfer.hpp"

namespace kvtier {

// -- reports (read by the replay driver at the end) ---------------------------------------------------

struct request_record {
  request_id req = 0;
  uint32_t file = 0;
  uint64_t line = 0;
  int64_t arrival_ns = 0;
  int64_t ready_ns = -1;        ///< storage prefetch landed; -1 = never
  int64_t admitted_ns = -1;     ///< first scheduled
  int64_t first_token_ns = -1;
  int64_t finish_ns = -1;
  uint32_t input_tokens = 0;
  uint32_t output_tokens = 0;
  uint32_t blocks = 0;
  per_tier<uint32_t> hit_blocks{};  ///< at the last admission
  per_tier<uint64_t> hit_tokens{};
  /// At the first admission: after a preemption, the last admission also finds the request's
  /// own blocks, computed before it was preempted.
  per_tier<uint32_t> first_hit_blocks{};
  per_tier<uint64_t> first_hit_tokens{};
  uint64_t computed_tokens = 0;        ///< prompt tokens computed, recomputation included
  /// Tokens computed again below what it had computed before (recomputed_tokens' share of it).
  uint64_t recomputed_tokens = 0;
  /// Prompt tokens a re-admission found cached that it had not reached before: neither hits at
  /// its first admission nor ever computed. first_hit_tokens + computed_tokens + late_hit_tokens
  /// = input_tokens + recomputed_tokens (model/scheduler/recompute_balance.hpp).
  uint64_t late_hit_tokens = 0;
  uint32_t preemptions = 0;
  uint32_t attempt = 0;                ///< PD: routings before this pass (handoff_order::reroutes)
  bool rejected = false;               ///< it could never fit on the device
  bool failed = false;                 ///< PD: its handoff failed (on_handoff_failure = error)
};

/// What the front end pushed and what came back. `exhausted`: the feed ended and every request
/// pushed was answered.
struct front_end_report {
  uint64_t read = 0;
  uint64_t pushed = 0;
  uint64_t finished = 0;
  uint64_t rejected = 0;
  bool exhausted = false;
  std::vector<uint64_t> per_instance;  ///< requests pushed to each instance
  // PD
  uint64_t failed = 0;                      ///< requests that ended in a handoff error
  uint64_t preallocation_refusals = 0;      ///< D refused a preallocation
  uint64_t decode_resource_timeouts = 0;    ///< P waited pd.wait_decode_resource_s in vain
  uint64_t handoff_failures = 0;            ///< handoffs that failed (P's send, or injected)
  uint64_t injected_failures = 0;           ///< of which pd.failure_rate drew
  uint64_t recomputed = 0;                  ///< failed handoffs D recomputed
  std::vector<int64_t> handoff_ns;          ///< per handed-off request: prefill end to decode ready
  /// rejected or failed before reaching a prefill instance
  std::vector<request_record> never_prefilled;
  uint64_t rerouted = 0;        ///< decode instances dropped a preempted request: routed again
  uint64_t rerouted_saved = 0;  ///< of which its blocks were written to storage first
};

/// One compute step's timeline (kept with scheduler_core_options::log_steps): what
/// `bench emulation --steps` writes for the modelled and the real run.
struct step_record {
  uint64_t step = 0;
  int64_t start_ns = 0;       ///< committed
  int64_t compute_ns = 0;     ///< its layers could begin (overhead and reuse wait behind it)
  int64_t end_ns = 0;         ///< its last layer ended
  uint64_t swap_in = 0;       ///< the swap-in its layers waited for (0: none)
  int64_t layer_wait_ns = 0;  ///< its layers' stall (scheduler_report::layer_wait_ns)
  int64_t reuse_wait_ns = 0;  ///< its wait for copies reading reused blocks
};

struct scheduler_report {
  std::vector<request_record> requests;
  uint64_t steps = 0;
  uint64_t probes = 0;
  uint64_t preemptions = 0;
  uint64_t recomputed_tokens = 0;
  int64_t layer_wait_ns = 0;   ///< compute time lost waiting for swapped-in layers
  /// Compute time lost waiting for copies still reading reused blocks (layer_pipeline.hpp).
  int64_t reuse_wait_ns = 0;
  int64_t busy_ns = 0;         ///< time spent computing steps
  uint64_t prefill_tokens = 0;
  uint64_t decode_tokens = 0;
  uint64_t rejected = 0;       ///< requests that could never fit on the device
  uint64_t refused_admissions = 0;  ///< commits whose planned admissions the controller refused
  /// Wall clock: virtual time lost to the host (planning a step, a step's end handled late);
  /// always 0 in virtual time, where neither takes any.
  int64_t lag_ns = 0;
  int64_t lag_max_ns = 0;      ///< the longest single such delay
  /// GPU compute: time between the layers of steps that follow no swap-in (launch gaps, not
  /// waits for copies; not modelled). 0 in virtual time.
  int64_t layer_gap_ns = 0;
  std::vector<step_record> step_log;  ///< with scheduler_core_options::log_steps
  bool drained = false;        ///< every request finished
  /// Tokens preempted requests found cached at re-admission, by tier.
  per_tier<uint64_t> restored_tokens{};
  // PD
  uint64_t pd_link_bytes = 0;        ///< prefill: KV sent over the PD link
  int64_t pd_link_busy_ns = 0;
  uint64_t pd_link_messages = 0;     ///< layer sends
  uint64_t handoff_blocks_sent = 0;  ///< prefill: blocks sent (direct) or written (storage)
  uint64_t handoff_blocks_skipped = 0;  ///< prefill, direct: blocks D already held
  uint64_t handoff_reads = 0;        ///< decode, storage: reads of handed-off blocks
  uint64_t handoff_read_failures = 0;   ///< of which failed (a block missing, or injected)
  uint64_t preallocations = 0;       ///< decode: preallocations granted
  uint64_t preallocation_refusals = 0;  ///< decode: refused (waiting queue, slot, blocks)
  uint64_t output_cache_writes = 0;  ///< cache.output_caching: finished requests written
  uint64_t output_cache_blocks = 0;  ///< and their blocks
  uint64_t decode_drops = 0;         ///< decode: victims dropped and sent back to the router
  uint64_t decode_drop_writes = 0;   ///< of which written to storage first
  uint64_t decode_drop_write_blocks = 0;  ///< blocks those writes waited for
  uint64_t decode_drop_write_timeouts = 0;  ///< writes not all visible within the poll limit
  int64_t decode_drop_write_wait_ns = 0;    ///< summed wait from preemption to all visible
};

/// One transfer as the engine ran it.
struct transfer_log {
  uint64_t id = 0;
  transfer_kind kind = transfer_kind::backup;
  uint32_t blocks = 0;
  int64_t duration_ns = 0;  ///< from its start (dependencies met) to its end
  int64_t end_ns = -1;      ///< when it ended, on the replay's clock (-1: not recorded)
  int64_t start_ns = 0;     ///< when it started, on the engine's clock (a run's timeline)
};

/// Which requests a swap-in transfer loaded blocks for (kept with controller_options::log).
struct swap_in_log {
  uint64_t transfer = 0;
  request_id req = 0;
  uint32_t blocks = 0;
};

/// What preemptions saved (scheduler.preemption) and how storage prefetches went.
struct preemption_io {
  uint64_t saved_blocks = 0;    ///< victims' computed blocks given a copy (or kept one)
  uint64_t d2h_blocks = 0;      ///< of those, copied device to host for it
  uint64_t stored_blocks = 0;   ///< written to storage for it
  uint64_t unsaved_blocks = 0;  ///< the host tier had no room for them
  uint64_t named_blocks = 0;    ///< generated (unlisted) blocks named so they can be found again
  uint64_t readmission_lookups = 0;  ///< storage lookups for preempted requests before re-admission
  /// Of d2h_blocks and stored_blocks, those the write policy would not have copied or stored
  /// anyway (docs/preemption.md, "What saving costs"): the bytes the mode adds.
  uint64_t marginal_d2h_blocks = 0;
  uint64_t marginal_stored_blocks = 0;
};

struct prefetch_stats {
  uint64_t started = 0;           ///< prefetches that loaded blocks
  uint64_t below_threshold = 0;   ///< storage matches too short to load (prefetch_threshold_tokens)
  uint64_t ready_early = 0;       ///< requests made ready before their loads landed (policy)
  uint64_t timeouts = 0;          ///< of those, by the timeout policy's deadline
  uint64_t protected_holds = 0;   ///< landed prefetches held until their request's admission
  uint64_t protected_released = 0;  ///< such holds let go before admission (nothing else ran)
  /// Blocks loaded for a request that were no hit at its admission: evicted before it, or
  /// landed after it (what a prefetch cost for nothing).
  uint64_t wasted_blocks = 0;
  /// Storage lookups made again just before admission, for requests whose cached prefix shrank
  /// since they became ready (the tiers evicted part of it to storage meanwhile).
  uint64_t admission_lookups = 0;
};

struct controller_report {
  uint64_t device_evictions = 0, host_evictions = 0, dropped = 0;
  uint64_t backups = 0, backups_skipped = 0, write_backs = 0, swap_ins = 0, loads = 0, stores = 0;
  uint64_t storage_probes = 0;
  uint64_t failed_loads = 0;  ///< prefetches lost to storage evictions before the read
  uint64_t transfers = 0;
  uint64_t copies_in_flight = 0;  ///< block copies issued and not yet done (live metrics)
  uint64_t invariant_checked = 0;
  uint64_t invariant_violations = 0;
  std::vector<std::string> invariant_messages;
  uint32_t tree_nodes = 0;
  uint32_t device_used = 0, host_used = 0;
  std::vector<swap_in_log> swap_ins_by_request;
  preemption_io preemption;
  prefetch_stats prefetch;
};

struct link_report {
  std::string name;
  uint64_t bytes = 0;
  int64_t busy_ns = 0;
  uint64_t transfers = 0;
};

struct engine_report {
  std::vector<link_report> links;
  per_transfer_kind<uint64_t> transfers{};
  per_transfer_kind<uint64_t> bytes{};
  uint64_t failed = 0;
  uint64_t payload_errors = 0;          ///< storage reads whose bytes were not what was stored
  /// Backpressure: stores that waited for storage to take bytes in flight, how long in all, and
  /// the most payload bytes handed to storage and not yet answered.
  uint64_t store_waits = 0;
  int64_t store_wait_ns = 0;
  uint64_t storage_inflight_peak_bytes = 0;
  std::string backend;                  ///< modelled or cuda
  std::string device;                   ///< cuda: the GPU
  std::vector<transfer_log> log;
};

/// What crossed the device -> host link: backups and write-backs alike.
inline uint64_t d2h_bytes(const engine_report& e) {
  return at(e.bytes, transfer_kind::backup) + at(e.bytes, transfer_kind::write_back);
}

struct storage_report {
  uint64_t exists_queries = 0, gets = 0, puts = 0;
  uint64_t keys_found = 0, keys_stored = 0;
  uint64_t evictions = 0;
  uint64_t stored = 0, capacity = 0;
  std::vector<link_report> nodes;
  /// Time from each get / put request to its answer, summed (modelled or measured).
  int64_t read_service_ns = 0, write_service_ns = 0;
  /// Real backends: what the modelled media (storage.read_gbps ...) would have taken for the same
  /// requests at the same instants, summed the same way.
  int64_t modelled_read_service_ns = 0, modelled_write_service_ns = 0;
  uint64_t bytes_read = 0, bytes_written = 0;  ///< payload bytes a backend moved (0: modelled)
  std::string backend;                     ///< model, memory, redis or file
  uint64_t puts_dropped = 0;               ///< blocks a put could not store (node down, disk full)
  /// Indexed blocks the backend did not have when an exists or a get asked (node down, or back
  /// empty after a restart): each leaves the index.
  uint64_t misses = 0;
  uint64_t open_leases = 0, pending = 0;   ///< gets not released, requests not answered (now)
  uint64_t rollbacks = 0;                  ///< partly written blocks removed
  uint64_t corrupt = 0;                    ///< blocks read back damaged (counted as misses)
  uint64_t node_downs = 0, reconnects = 0;
  uint64_t removed = 0;                    ///< evicted blocks deleted from the backend
  uint64_t rebuilt = 0;                    ///< blocks indexed from the backend at start
  // Pool semantics (docs/faults.md, "Pool semantics").
  uint64_t put_present = 0;      ///< keys a put found stored already: not written again
  uint64_t put_in_flight = 0;    ///< keys a put found being written: not written twice
  uint64_t exists_leases = 0;    ///< keys an exists leased for storage.lease_ms
  uint64_t lease_deferrals = 0;  ///< evictions passed over a leased key
  uint64_t eviction_batches = 0; ///< watermark eviction batches
  uint64_t writes_in_flight = 0; ///< puts not ended (now)
  uint64_t leased_keys = 0;      ///< keys under a get lease (now)
  // Injected faults (faults.*) and their outcomes.
  uint64_t node_losses = 0, node_returns = 0, keys_lost = 0;
  uint64_t slow_windows = 0;
  uint64_t get_failures = 0;     ///< keys a get failed to read (injected)
  uint64_t put_failures = 0;     ///< keys a put failed to write (injected): rolled back
  uint64_t puts_node_down = 0;   ///< keys a put could not write: their node was down
  uint64_t puts_lost = 0;        ///< keys whose write was in flight when their node was lost
  uint64_t reads_lost = 0;       ///< keys a get was reading when their node was lost
  // A real backend's failures, said out loud (docs/robustness.md).
  uint64_t puts_no_room = 0;     ///< keys a put could not write: capacity all being written/read
  uint64_t deletes_in_flight_max = 0;  ///< most evicted blocks whose delete had not completed
  uint64_t reconciles = 0;       ///< index checks against the backend after a reconnect
  uint64_t blocks_lost = 0;      ///< indexed blocks a reconcile found gone from the backend
  uint64_t deletes_failed = 0;   ///< blocks whose delete could not run (node out of reach)
  uint64_t deletes_retried = 0;  ///< of those, deletes run again once the node answered
  uint64_t deletes_owed = 0;     ///< deletes still owed (now): the backend may hold them
  uint64_t orphans_removed = 0;  ///< blocks a reconcile found in the backend, not in the index
  uint64_t auth_failures = 0;    ///< connections whose credentials a Redis node refused
  uint64_t tls_failures = 0;     ///< TLS handshakes with a Redis node that failed
  std::string put_error;         ///< the backend's first failed put, in its words
  // The index's own checks (storage_index::check), run when the report is asked for.
  uint64_t invariant_checked = 0, invariant_violations = 0;
  std::vector<std::string> invariant_messages;
};

}  // namespace kvtier
