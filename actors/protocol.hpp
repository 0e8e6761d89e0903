#pragma once

// The messages between kvtier's actors and their typed interfaces, in one place.
//
//   front end ── request_arrival ─► scheduler            (one per request, answered request_done)
//      │  prefix_lookup (router probe)        │
//      ▼                                      │  arrival ─► ready        exists ─► exists_reply
//   cache_controller ◄────────────────────────┘  probe ─► probe_reply  ─────────────────► storage
//      │   ▲                                     commit ─► grant                        ▲  │
//      │   │ transfer_done (per-layer times)                                            │  │
//      ▼   │                                                              get/put ─►    │  ▼
//   transfer_engine ─────────────────────────────────────────────────────────────────────┘
//
// The front end owns the workload (arrivals, sessions, routing to instances); each instance's
// scheduler owns its requests (batching, admission, chunked prefill, preemption); its cache
// controller owns the block index and decides every block move; its transfer engine moves bytes
// (modelled links or CUDA); storage keeps the L3 pool that every instance shares. One commit per
// scheduler step carries all block work of the step (never one message per block); the grant
// comes back once the step's inputs are in device memory, with the time each layer arrived, so
// the scheduler runs layer i's compute as soon as layer i is there.
//
// Every message is a plain struct of ids and integers with an inspect(), so it can cross a
// process boundary (registered in the kvtier type-ID block at the end of this file); the one
// exception is a storage get's destination (payload_destination), an address in this process.
// Times are virtual nanoseconds since the start of the replay (sim_clock.hpp).

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "caf/all.hpp"

#include "actors/cache_controller/block_hash.hpp"
#include "core/trace_request.hpp"

namespace kvtier {

using request_id = uint64_t;

// -- front end -> scheduler -------------------------------------------------------------------------

/// A request arrives at its instance now, with its prompt's cache blocks. The scheduler answers
/// when the request has finished (or was rejected: it can never fit the device), which is when
/// the session turns that follow it start their think time.
/// PD: a request prefilled here is handed off to a decode instance (docs/cluster.md).
struct handoff_order {
  bool active = false;
  uint32_t decode_has_blocks = 0;  ///< leading blocks D already holds: never sent (direct)
  /// Times a decode instance dropped this request at preemption and the front end routed it
  /// again (spec 7.3): its prompt is then the original prompt plus the tokens generated so far.
  uint32_t reroutes = 0;
};

struct request_arrival {
  trace_request req;
  std::vector<cache_block> blocks;
  handoff_order handoff;
};

struct request_done {
  request_id req = 0;
  int64_t at_ns = 0;
  bool rejected = false;
  bool failed = false;           ///< PD: the handoff failed and the request ends in error
  // PD, from a prefill instance: the handoff as it went
  int64_t prefill_end_ns = -1;   ///< the step that computed the prompt's last token ended
  int64_t first_token_ns = -1;   ///< the first token was emitted
  bool handoff_ok = true;        ///< the KV reached D (direct) or storage (storage) whole
  // PD, from a decode instance
  int64_t decode_ready_ns = -1;  ///< its KV was in place (or recomputed): decoding could start
  bool recomputed = false;       ///< the handoff failed and D computed the prompt itself
  /// Preempted on a decode instance and dropped there (spec 7.3): the front end routes it again
  /// as a request of `resume_prompt` tokens (prompt and generated) over `resume_blocks` (its
  /// listed blocks, with the generated blocks a save named), to generate `resume_output` more.
  bool dropped = false;
  int64_t dropped_ns = -1;          ///< when it was preempted (at_ns: after the optional write)
  bool drop_saved = false;          ///< its blocks were written to storage first
  uint32_t resume_prompt = 0;
  uint32_t resume_output = 0;
  std::vector<cache_block> resume_blocks;
};

// -- front end -> decode instance (PD) ------------------------------------------------------------

/// Before P prefills a request, its decode instance preallocates the request's blocks
/// (FastDeploy's preallocate_resource_in_d, spec section 7.4).
struct preallocate_request {
  request_arrival arrival;
};

struct preallocate_reply {
  request_id req = 0;
  uint8_t verdict = 0;             ///< preallocation_verdict
  uint32_t device_hit_blocks = 0;  ///< leading prompt blocks D already held
};

enum class handoff_outcome : uint8_t {
  delivered = 0,  ///< P's KV is at D (direct) or in storage (storage)
  failed = 1,     ///< P's send failed
  cancelled = 2,  ///< P never prefilled it (rejected there): D gives the blocks back
};

/// P is done with a request: D may decode it. Answered when D finishes it.
struct kv_handoff {
  request_id req = 0;
  uint8_t outcome = 0;  ///< handoff_outcome
  int64_t first_token_ns = -1;
  bool inject_failure = false;  ///< pd.failure_rate drew this handoff: it fails
};

// -- front end -> cache controller (routing) ------------------------------------------------------

/// How much of this prompt the instance holds now, device then host, without taking anything.
struct prefix_lookup {
  std::vector<cache_block> blocks;
};

struct prefix_hit {
  uint32_t device_blocks = 0;
  uint32_t host_blocks = 0;
  uint64_t device_tokens = 0;
  uint64_t host_tokens = 0;
};

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
  /// A decode instance drops its victims (spec 7.3): once their blocks are released (and saved,
  /// by scheduler.preemption) the controller forgets them.
  bool drop_preempted = false;
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
  /// Per layer: when its swapped-in blocks (and every copy that still read reused blocks) were
  /// in place. Empty: everything was in place at commit time.
  std::vector<int64_t> layer_ready_ns;
  /// Real backend: the grant comes before the step's swap-in lands; the step's compute waits for
  /// this transfer layer by layer on the device (0: none).
  uint64_t swap_in = 0;
  /// With commit::drop_preempted: per victim, in the commit's order, how many storage keys its
  /// save writes (`dropped_keys`, in block order), so the decode instance can wait until they
  /// are visible before the request goes back to the router.
  std::vector<uint32_t> dropped_key_counts;
  std::vector<uint64_t> dropped_keys;
};

// -- scheduler -> GPU compute (real backend: the step's compute runs on the GPU) ----------------------

struct compute_request {
  uint64_t step = 0;
  int64_t lead_ns = 0;            ///< the step's overhead, before layer 0, waiting for nothing
  std::vector<int64_t> layer_ns;  ///< busy time of each layer
  uint64_t after_swap_in = 0;     ///< layer i starts once this swap-in's layer i is in place
};

struct compute_done {
  uint64_t step = 0;
  bool ok = true;
  int64_t stall_ns = 0;  ///< time layers waited for their swapped-in data
  std::string error;
};

// -- cache controller -> storage --------------------------------------------------------------------

struct exists_query {
  std::vector<uint64_t> keys;  ///< storage keys, in prompt order
};

struct exists_reply {
  uint32_t leading = 0;  ///< how many leading keys are stored
};

// -- cache controller -> transfer engine -------------------------------------------------------------

enum class move_kind : uint8_t {
  swap_in = 0,  ///< host -> device, layer by layer
  d2h = 1,      ///< device -> host, all layers at once (backups and write-backs)
  load = 2,     ///< storage -> host
  store = 3,    ///< host -> storage
  fill = 4,     ///< --verify: a step produced these device blocks; mark each with its pattern
};
inline constexpr int move_kinds = 5;

struct block_move {
  uint32_t device_block = 0;
  uint32_t host_block = 0;
  block_hash hash = 0;
  uint64_t storage_key = 0;
};

/// One batched transfer. It starts once every transfer in `after` is done (an earlier copy still
/// reads a block this one writes).
struct transfer {
  uint64_t id = 0;
  uint8_t kind = 0;  ///< move_kind
  std::vector<block_move> blocks;
  std::vector<uint64_t> after;
};

struct transfer_done {
  uint64_t id = 0;
  bool ok = true;
  int64_t done_ns = 0;
  std::vector<int64_t> layer_done_ns;  ///< swap-ins: when each layer was in device memory
  std::string error;
};

// -- transfer engine -> storage ------------------------------------------------------------------------

/// Where a get puts one block's bytes: `size` bytes of memory that the asking actor owns (a
/// host-tier block, a buffer of its own) and leaves alone until the get's reply. The one field of
/// the protocol that is not plain data: an address in this process, so storage requests that read
/// bytes never cross a process boundary (the storage actor runs beside the transfer engines that
/// ask it). It lets the backend read straight into the bytes' final place: no buffer per block is
/// allocated, filled, carried and copied again.
struct payload_destination {
  uint64_t address = 0;
  uint64_t size = 0;
};

/// Reads (get) or writes (put) blocks of `bytes_each` bytes; storage answers after its service
/// time. A get leases its keys until `storage_release`. With a byte-carrying storage backend
/// (storage.backend = memory | redis | file) `hashes` names each block in the backend, a put
/// carries each block's bytes in `payloads` and a get names where each block's bytes go in
/// `into`; with the modelled one all three stay empty.
struct storage_io {
  std::vector<uint64_t> keys;
  uint64_t bytes_each = 0;
  std::vector<uint64_t> hashes;                ///< block hash of each key
  std::vector<std::vector<uint8_t>> payloads;  ///< put: the bytes of each block
  std::vector<payload_destination> into;       ///< get: where each block's bytes go
};

struct storage_io_reply {
  uint32_t done = 0;   ///< keys found (get) or stored (put)
  uint64_t lease = 0;  ///< get: names the keys it leased, for storage_release
  /// get with a byte-carrying backend: per key, whether its bytes are in its `into` (exactly
  /// `into[i].size` of them); after a miss that memory holds nothing meaningful.
  std::vector<uint8_t> found;
};

/// A backend's answer to one storage request, as the storage actor posts it to itself.
struct storage_backend_done {
  uint64_t io = 0;
  std::vector<uint8_t> ok;       ///< exists: present; put: stored; get: read (per block)
  std::vector<uint64_t> listed;  ///< rebuild: the block hashes the backend holds
  /// When the backend finished, on the actor clock (its clock_type's ticks since its epoch);
  /// 0: not recorded.
  int64_t done_at = 0;
};

struct storage_release {
  uint64_t lease = 0;
};

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
  std::array<uint32_t, 3> hit_blocks{};  ///< device, host, storage (at the last admission)
  std::array<uint64_t, 3> hit_tokens{};
  /// At the first admission: after a preemption, the last admission also finds the request's
  /// own blocks, computed before it was preempted.
  std::array<uint32_t, 3> first_hit_blocks{};
  std::array<uint64_t, 3> first_hit_tokens{};
  uint64_t computed_tokens = 0;        ///< prompt tokens computed, recomputation included
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
  std::vector<request_record> never_prefilled;  ///< failed before reaching a prefill instance
  uint64_t rerouted = 0;        ///< decode instances dropped a preempted request: routed again
  uint64_t rerouted_saved = 0;  ///< of which its blocks were written to storage first
};

struct scheduler_report {
  std::vector<request_record> requests;
  uint64_t steps = 0;
  uint64_t probes = 0;
  uint64_t preemptions = 0;
  uint64_t recomputed_tokens = 0;
  int64_t layer_wait_ns = 0;   ///< compute time lost waiting for swapped-in layers
  int64_t busy_ns = 0;         ///< time spent computing steps
  uint64_t prefill_tokens = 0;
  uint64_t decode_tokens = 0;
  uint64_t rejected = 0;       ///< requests that could never fit on the device
  uint64_t refused_admissions = 0;  ///< commits whose planned admissions the controller refused
  /// Wall clock: virtual time lost to the host (planning a step, a step's end handled late);
  /// always 0 in virtual time, where neither takes any.
  int64_t lag_ns = 0;
  int64_t lag_max_ns = 0;      ///< the longest single such delay
  bool drained = false;        ///< every request finished
  /// Tokens preempted requests found cached at re-admission, by tier (device, host, storage).
  std::array<uint64_t, 3> restored_tokens{};
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
  uint8_t kind = 0;
  uint32_t blocks = 0;
  int64_t duration_ns = 0;  ///< from its start (dependencies met) to its end
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
};

struct prefetch_stats {
  uint64_t started = 0;           ///< prefetches that loaded blocks
  uint64_t below_threshold = 0;   ///< storage matches too short to load (prefetch_threshold_tokens)
  uint64_t ready_early = 0;       ///< requests made ready before their loads landed (policy)
  uint64_t timeouts = 0;          ///< of those, by the timeout policy's deadline
  uint64_t protected_holds = 0;   ///< landed prefetches held until their request's admission
  uint64_t protected_released = 0;  ///< such holds let go before admission (nothing else ran)
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
  std::array<uint64_t, move_kinds> transfers{};  ///< by move_kind
  std::array<uint64_t, move_kinds> bytes{};
  uint64_t failed = 0;
  uint64_t payload_errors = 0;          ///< storage reads whose bytes were not what was stored
  std::string backend;                  ///< modelled or cuda
  std::string device;                   ///< cuda: the GPU
  std::vector<transfer_log> log;
};

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
  // Pool semantics (docs/design.md, "Storage pool semantics").
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
  // The index's own checks (storage_index::check), run when the report is asked for.
  uint64_t invariant_checked = 0, invariant_violations = 0;
  std::vector<std::string> invariant_messages;
};

// -- inspect ---------------------------------------------------------------------------------------------

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cache_block& x) {
  return f(caf::meta::type_name("cache_block"), x.hash, x.tokens);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, trace_request& x) {
  return f(caf::meta::type_name("trace_request"), x.seq, x.file, x.line, x.arrival_ns,
           x.input_tokens, x.output_tokens, x.ids, x.trace_block_size, x.id_space, x.tokens,
           x.session, x.turn, x.think_ns, x.follows_previous, x.parent_session, x.parent_turn);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, request_arrival& x) {
  return f(caf::meta::type_name("request_arrival"), x.req, x.blocks, x.handoff);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, handoff_order& x) {
  return f(caf::meta::type_name("handoff_order"), x.active, x.decode_has_blocks,
           x.reroutes);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, preallocate_request& x) {
  return f(caf::meta::type_name("preallocate_request"), x.arrival);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, preallocate_reply& x) {
  return f(caf::meta::type_name("preallocate_reply"), x.req, x.verdict, x.device_hit_blocks);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, kv_handoff& x) {
  return f(caf::meta::type_name("kv_handoff"), x.req, x.outcome, x.first_token_ns,
           x.inject_failure);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, preallocation& x) {
  return f(caf::meta::type_name("preallocation"), x.req, x.blocks, x.tokens);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, preallocation_result& x) {
  return f(caf::meta::type_name("preallocation_result"), x.req, x.ok, x.device_hit_blocks,
           x.device_hit_tokens, x.available_blocks);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, request_done& x) {
  return f(caf::meta::type_name("request_done"), x.req, x.at_ns, x.rejected, x.failed,
           x.prefill_end_ns, x.first_token_ns, x.handoff_ok, x.decode_ready_ns, x.recomputed,
           x.dropped, x.dropped_ns, x.drop_saved, x.resume_prompt, x.resume_output,
           x.resume_blocks);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, prefix_lookup& x) {
  return f(caf::meta::type_name("prefix_lookup"), x.blocks);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, prefix_hit& x) {
  return f(caf::meta::type_name("prefix_hit"), x.device_blocks, x.host_blocks, x.device_tokens,
           x.host_tokens);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, front_end_report& x) {
  return f(caf::meta::type_name("front_end_report"), x.read, x.pushed, x.finished, x.rejected,
           x.exhausted, x.per_instance, x.failed, x.preallocation_refusals,
           x.decode_resource_timeouts, x.handoff_failures, x.injected_failures, x.recomputed,
           x.handoff_ns, x.never_prefilled, x.rerouted, x.rerouted_saved);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, arrival& x) {
  return f(caf::meta::type_name("arrival"), x.req, x.blocks, x.readmission);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, ready& x) {
  return f(caf::meta::type_name("ready"), x.req, x.prefetched_blocks, x.available_blocks);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, probe& x) {
  return f(caf::meta::type_name("probe"), x.step, x.candidates, x.grow_blocks, x.victims);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, candidate_match& x) {
  return f(caf::meta::type_name("candidate_match"), x.req, x.device_blocks, x.host_blocks,
           x.device_tokens, x.host_tokens, x.idle_device_blocks);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, probe_reply& x) {
  return f(caf::meta::type_name("probe_reply"), x.step, x.available_blocks, x.matches,
           x.victim_frees);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, token_mark& x) {
  return f(caf::meta::type_name("token_mark"), x.req, x.tokens);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, commit& x) {
  return f(caf::meta::type_name("commit"), x.step, x.computed, x.finished, x.preempted, x.grows,
           x.admits, x.drop_preempted);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, admit_result& x) {
  return f(caf::meta::type_name("admit_result"), x.req, x.admitted, x.device_blocks,
           x.host_blocks, x.storage_blocks, x.device_tokens, x.host_tokens, x.storage_tokens);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, grant& x) {
  return f(caf::meta::type_name("grant"), x.step, x.admits, x.failed_grows, x.available_blocks,
           x.layer_ready_ns, x.swap_in, x.dropped_key_counts, x.dropped_keys);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, compute_request& x) {
  return f(caf::meta::type_name("compute_request"), x.step, x.lead_ns, x.layer_ns,
           x.after_swap_in);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, compute_done& x) {
  return f(caf::meta::type_name("compute_done"), x.step, x.ok, x.stall_ns, x.error);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, transfer_log& x) {
  return f(caf::meta::type_name("transfer_log"), x.id, x.kind, x.blocks, x.duration_ns);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, swap_in_log& x) {
  return f(caf::meta::type_name("swap_in_log"), x.transfer, x.req, x.blocks);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, exists_query& x) {
  return f(caf::meta::type_name("exists_query"), x.keys);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, exists_reply& x) {
  return f(caf::meta::type_name("exists_reply"), x.leading);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, block_move& x) {
  return f(caf::meta::type_name("block_move"), x.device_block, x.host_block, x.hash,
           x.storage_key);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, transfer& x) {
  return f(caf::meta::type_name("transfer"), x.id, x.kind, x.blocks, x.after);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, transfer_done& x) {
  return f(caf::meta::type_name("transfer_done"), x.id, x.ok, x.done_ns, x.layer_done_ns,
           x.error);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, payload_destination& x) {
  return f(caf::meta::type_name("payload_destination"), x.address, x.size);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, storage_io& x) {
  return f(caf::meta::type_name("storage_io"), x.keys, x.bytes_each, x.hashes, x.payloads, x.into);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, storage_io_reply& x) {
  return f(caf::meta::type_name("storage_io_reply"), x.done, x.lease, x.found);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, storage_backend_done& x) {
  return f(caf::meta::type_name("storage_backend_done"), x.io, x.ok, x.listed, x.done_at);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, storage_release& x) {
  return f(caf::meta::type_name("storage_release"), x.lease);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, request_record& x) {
  return f(caf::meta::type_name("request_record"), x.req, x.file, x.line, x.arrival_ns,
           x.ready_ns, x.admitted_ns, x.first_token_ns, x.finish_ns, x.input_tokens,
           x.output_tokens, x.blocks, x.hit_blocks, x.hit_tokens, x.first_hit_blocks,
           x.first_hit_tokens, x.computed_tokens, x.preemptions, x.attempt, x.rejected, x.failed);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, scheduler_report& x) {
  return f(caf::meta::type_name("scheduler_report"), x.requests, x.steps, x.probes,
           x.preemptions, x.recomputed_tokens, x.layer_wait_ns, x.busy_ns, x.prefill_tokens,
           x.decode_tokens, x.rejected, x.refused_admissions, x.lag_ns, x.lag_max_ns,
           x.drained, x.restored_tokens, x.pd_link_bytes, x.pd_link_busy_ns, x.pd_link_messages,
           x.handoff_blocks_sent, x.handoff_blocks_skipped, x.handoff_reads,
           x.handoff_read_failures, x.preallocations, x.preallocation_refusals,
           x.output_cache_writes, x.output_cache_blocks, x.decode_drops, x.decode_drop_writes,
           x.decode_drop_write_blocks, x.decode_drop_write_timeouts, x.decode_drop_write_wait_ns);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, controller_report& x) {
  return f(caf::meta::type_name("controller_report"), x.device_evictions, x.host_evictions,
           x.dropped, x.backups, x.backups_skipped, x.write_backs, x.swap_ins, x.loads, x.stores,
           x.storage_probes, x.failed_loads, x.transfers, x.copies_in_flight,
           x.invariant_checked, x.invariant_violations, x.invariant_messages, x.tree_nodes,
           x.device_used, x.host_used, x.swap_ins_by_request, x.preemption, x.prefetch);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, preemption_io& x) {
  return f(caf::meta::type_name("preemption_io"), x.saved_blocks, x.d2h_blocks, x.stored_blocks,
           x.unsaved_blocks, x.named_blocks, x.readmission_lookups);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, prefetch_stats& x) {
  return f(caf::meta::type_name("prefetch_stats"), x.started, x.below_threshold, x.ready_early,
           x.timeouts, x.protected_holds, x.protected_released);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, link_report& x) {
  return f(caf::meta::type_name("link_report"), x.name, x.bytes, x.busy_ns, x.transfers);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, engine_report& x) {
  return f(caf::meta::type_name("engine_report"), x.links, x.transfers, x.bytes, x.failed,
           x.payload_errors, x.backend, x.device, x.log);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, storage_report& x) {
  return f(caf::meta::type_name("storage_report"), x.exists_queries, x.gets, x.puts,
           x.keys_found, x.keys_stored, x.evictions, x.stored, x.capacity, x.nodes,
           x.read_service_ns, x.write_service_ns, x.modelled_read_service_ns,
           x.modelled_write_service_ns, x.bytes_read, x.bytes_written, x.backend,
           x.puts_dropped, x.misses, x.open_leases, x.pending, x.rollbacks, x.corrupt, x.node_downs, x.reconnects,
           x.removed, x.rebuilt, x.put_present, x.put_in_flight, x.exists_leases,
           x.lease_deferrals, x.eviction_batches, x.writes_in_flight, x.leased_keys, x.node_losses,
           x.node_returns, x.keys_lost, x.slow_windows, x.get_failures, x.put_failures,
           x.puts_node_down, x.puts_lost, x.reads_lost, x.invariant_checked,
           x.invariant_violations, x.invariant_messages);
}

}  // namespace kvtier

// -- type IDs and atoms ------------------------------------------------------------------------------------

CAF_BEGIN_TYPE_ID_BLOCK(kvtier, caf::first_custom_type_id)
  CAF_ADD_TYPE_ID(kvtier, (kvtier::cache_block))
  CAF_ADD_TYPE_ID(kvtier, (std::vector<kvtier::cache_block>))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::arrival))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::ready))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::probe))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::candidate_match))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::probe_reply))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::token_mark))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::commit))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::admit_result))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::grant))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::exists_query))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::exists_reply))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::block_move))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::transfer))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::transfer_done))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::storage_io))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::storage_io_reply))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::storage_release))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::request_record))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::scheduler_report))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::controller_report))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::link_report))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::engine_report))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::storage_report))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::compute_request))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::compute_done))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::transfer_log))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::swap_in_log))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::trace_request))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::request_arrival))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::request_done))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::front_end_report))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::prefix_lookup))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::prefix_hit))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::storage_backend_done))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::preemption_io))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::prefetch_stats))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::handoff_order))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::preallocate_request))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::preallocate_reply))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::kv_handoff))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::preallocation))
  CAF_ADD_TYPE_ID(kvtier, (kvtier::preallocation_result))
  CAF_ADD_ATOM(kvtier, kvtier, wake_atom, "wake")
  CAF_ADD_ATOM(kvtier, kvtier, report_atom, "report")
  CAF_ADD_ATOM(kvtier, kvtier, attach_atom, "attach")
  CAF_ADD_ATOM(kvtier, kvtier, step_atom, "step")
  CAF_ADD_ATOM(kvtier, kvtier, run_atom, "run")
  CAF_ADD_ATOM(kvtier, kvtier, gpu_done_atom, "gpu_done")
  CAF_ADD_ATOM(kvtier, kvtier, rebuild_atom, "rebuild")
  CAF_ADD_ATOM(kvtier, kvtier, handoff_atom, "handoff")
CAF_END_TYPE_ID_BLOCK(kvtier)

namespace kvtier {

// -- typed interfaces -----------------------------------------------------------------------------------
// Each actor also accepts (wake_atom, generation) from itself: its timers. A timer whose generation
// is stale (superseded by a later plan) is ignored.

using storage_actor = caf::typed_actor<
  caf::replies_to<exists_query>::with<exists_reply>,
  caf::replies_to<caf::get_atom, storage_io>::with<storage_io_reply>,
  caf::replies_to<caf::put_atom, storage_io>::with<storage_io_reply>,
  caf::reacts_to<storage_release>,
  caf::replies_to<report_atom>::with<storage_report>,
  caf::reacts_to<wake_atom, uint64_t>,
  caf::reacts_to<storage_backend_done>,          ///< from its backend's completions
  /// Indexes every block the backend holds (a restarted pool); answers how many it indexed.
  caf::replies_to<rebuild_atom>::with<uint64_t>>;

using transfer_engine_actor = caf::typed_actor<
  caf::replies_to<transfer>::with<transfer_done>,
  caf::replies_to<report_atom>::with<engine_report>,
  caf::reacts_to<wake_atom, uint64_t>,
  caf::reacts_to<gpu_done_atom, uint64_t, int32_t>>;  ///< CUDA: op, layer (-1: all) completed

/// Real backend: runs each step's compute on the GPU, layer l after layer l of the step's swap-in.
using gpu_compute_actor = caf::typed_actor<
  caf::replies_to<compute_request>::with<compute_done>,
  caf::reacts_to<gpu_done_atom, uint64_t, int32_t>>;  ///< CUDA: a compute op completed

using cache_controller_actor = caf::typed_actor<
  caf::replies_to<prefix_lookup>::with<prefix_hit>,  ///< the router's probe
  caf::replies_to<preallocation>::with<preallocation_result>,  ///< PD decode instance
  caf::replies_to<arrival>::with<ready>,
  caf::replies_to<probe>::with<probe_reply>,
  caf::replies_to<commit>::with<grant>,
  caf::replies_to<report_atom>::with<controller_report>,  ///< runs every invariant check
  caf::replies_to<caf::get_atom>::with<bool>,             ///< idle: nothing held or moving
  caf::reacts_to<wake_atom, uint64_t>>;  ///< a prefetch's deadline (storage.prefetch_policy)

using scheduler_actor = caf::typed_actor<
  caf::replies_to<request_arrival>::with<request_done>,
  caf::reacts_to<step_atom, uint64_t>,    ///< timer: step n ends (0: plan now)
  caf::replies_to<report_atom>::with<scheduler_report>,
  caf::replies_to<preallocate_request>::with<preallocate_reply>,  ///< PD decode instance
  caf::replies_to<kv_handoff>::with<request_done>,                ///< PD decode instance
  caf::reacts_to<handoff_atom, uint64_t>>;  ///< PD prefill: request n's KV send completed

/// Owns the workload: pushes each request to an instance when it arrives. `run` starts it and is
/// answered once every request was answered (or with an error naming bad input).
using front_end_actor = caf::typed_actor<
  caf::replies_to<run_atom>::with<front_end_report>,
  caf::replies_to<report_atom>::with<front_end_report>,
  caf::reacts_to<wake_atom, uint64_t>,
  caf::reacts_to<handoff_atom, uint64_t>>;  ///< PD: ask D again for request n, or give up

/// Registers every message type of this header with an actor system config.
inline void add_kvtier_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::kvtier>();
}

}  // namespace kvtier
