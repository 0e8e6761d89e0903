#pragma once

// The actors' messages as CAF sees them: every message of model/messages.hpp with its inspect(),
// the kvtier type-ID block and atoms, and each actor's typed interface.

#include "caf/all.hpp"

#include "model/messages.hpp"

namespace kvtier {

// -- inspect ---------------------------------------------------------------------------------------------
// A message's enum fields (transfer::kind, transfer_log::kind, preallocate_reply::verdict,
// kv_handoff::outcome) are inspected as their enum type: CAF 0.17's serializers round-trip any
// enum through its underlying type, and its to_string() names it in logs. An inspect() overload
// of an enum of ours would be ambiguous with that built-in rule, so there is none; each such
// enum has a to_string() instead.

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
  return f(caf::meta::type_name("arrival"), x.req, x.blocks, x.readmission, x.target_tokens);
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
           x.device_tokens, x.host_tokens, x.idle_device_blocks, x.lost_blocks);
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
           x.admits, x.drop_preempted, x.device_dropped,
           x.admit_blocks, x.grow_blocks);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, admit_result& x) {
  return f(caf::meta::type_name("admit_result"), x.req, x.admitted, x.device_blocks,
           x.host_blocks, x.storage_blocks, x.device_tokens, x.host_tokens, x.storage_tokens);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, grant& x) {
  return f(caf::meta::type_name("grant"), x.step, x.admits, x.failed_grows, x.available_blocks,
           x.layer_ready_ns, x.reused_ready_ns, x.swap_in, x.swap_in_blocks, x.dropped_key_counts,
           x.dropped_keys);
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
  return f(caf::meta::type_name("transfer_log"), x.id, x.kind, x.blocks, x.duration_ns,
           x.end_ns, x.start_ns);
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
  return f(caf::meta::type_name("storage_backend_done"), x.io, x.ok, x.listed, x.partial,
           x.done_at);
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
           x.first_hit_tokens, x.computed_tokens, x.recomputed_tokens, x.late_hit_tokens,
           x.preemptions, x.attempt, x.rejected, x.failed);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_record& x) {
  return f(caf::meta::type_name("step_record"), x.step, x.start_ns, x.compute_ns, x.end_ns,
           x.swap_in, x.layer_wait_ns, x.reuse_wait_ns);
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
           x.decode_drop_write_blocks, x.decode_drop_write_timeouts, x.decode_drop_write_wait_ns,
           x.layer_gap_ns, x.reuse_wait_ns, x.step_log);
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
           x.unsaved_blocks, x.named_blocks, x.readmission_lookups, x.marginal_d2h_blocks,
           x.marginal_stored_blocks);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, prefetch_stats& x) {
  return f(caf::meta::type_name("prefetch_stats"), x.started, x.below_threshold, x.ready_early,
           x.timeouts, x.protected_holds, x.protected_released, x.wasted_blocks,
           x.admission_lookups);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, link_report& x) {
  return f(caf::meta::type_name("link_report"), x.name, x.bytes, x.busy_ns, x.transfers);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, engine_report& x) {
  return f(caf::meta::type_name("engine_report"), x.links, x.transfers, x.bytes, x.failed,
           x.payload_errors, x.store_waits, x.store_wait_ns, x.storage_inflight_peak_bytes,
           x.backend, x.device, x.log);
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
           x.puts_node_down, x.puts_lost, x.reads_lost, x.puts_no_room,
           x.deletes_in_flight_max, x.reconciles, x.blocks_lost, x.deletes_failed,
           x.deletes_retried, x.deletes_owed, x.orphans_removed, x.auth_failures, x.tls_failures,
           x.put_error, x.invariant_checked,
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
  CAF_ADD_TYPE_ID(kvtier, (kvtier::step_record))
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
  CAF_ADD_ATOM(kvtier, kvtier, tree_work_atom, "tree_work")
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
  caf::reacts_to<wake_atom, uint64_t>,  ///< a prefetch's deadline (storage.prefetch_policy)
  caf::reacts_to<tree_work_atom>>;  ///< a live step's reply went out: its tree work now

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
  /// A scheduler's answer to a request_arrival or kv_handoff the front end sent (not requested:
  /// see front_end.cpp, "answers").
  caf::reacts_to<request_done>,
  caf::reacts_to<wake_atom, uint64_t>,
  caf::reacts_to<handoff_atom, uint64_t>>;  ///< PD: ask D again for request n, or give up

/// Registers every message type of this header with an actor system config.
inline void add_kvtier_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::kvtier>();
}

}  // namespace kvtier
