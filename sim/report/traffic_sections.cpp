#include "sim/report/summary_sections.hpp"

#include "sim/report/summary_math.hpp"

namespace kvtier {

using nlohmann::json;

namespace {

json link_list(const full_result& r) {
  json links = json::array();
  for (const auto* group : {&r.engine.links, &r.storage.nodes})
    for (const link_report& l : *group)
      links.push_back({{"name", l.name}, {"bytes", l.bytes}, {"busy_s", seconds6(l.busy_ns)},
                       {"transfers", l.transfers}});
  return links;
}

}  // namespace

json traffic_section(const full_result& r) {
  const engine_report& e = r.engine;
  // Transfer time per kind: from each transfer's start (its dependencies met) to its end, as
  // the modelled links computed it or as CUDA events measured it.
  per_transfer_kind<double> kind_ns{};
  for (const transfer_log& l : e.log)
    at(kind_ns, l.kind) += static_cast<double>(l.duration_ns);
  // The device -> host link carries backups and write-backs alike: one figure for both.
  const double h2d_ns = at(kind_ns, transfer_kind::swap_in);
  const double d2h_ns = at(kind_ns, transfer_kind::backup) + at(kind_ns, transfer_kind::write_back);
  auto rate = [](uint64_t bytes, double ns) {
    return round6(ns > 0 ? static_cast<double>(bytes) / ns : 0.0);
  };
  json out = {{"h2d_bytes", at(e.bytes, transfer_kind::swap_in)},
          {"d2h_bytes", d2h_bytes(e)},
          {"storage_read_bytes", at(e.bytes, transfer_kind::load)},
          {"storage_write_bytes", at(e.bytes, transfer_kind::store)},
          {"backend", e.backend}, {"device", e.device},
          {"h2d_transfer_s", round6(h2d_ns / 1e9)},
          {"d2h_transfer_s", round6(d2h_ns / 1e9)},
          {"h2d_gbps", rate(at(e.bytes, transfer_kind::swap_in), h2d_ns)},
          {"d2h_gbps", rate(d2h_bytes(e), d2h_ns)},
          {"links", link_list(r)}};
  if (e.backend == "cuda") {  // the real backend's start-up, before the replay's clock ran
    const gpu::startup_timing& s = r.startup;
    out["startup_s"] = {{"device_memory", round6(s.device_memory_s)},
                        {"host_pinning", round6(s.host_pinning_s)},
                        {"compute_calibration", round6(s.compute_calibration_s)},
                        {"total", round6(s.total_s)}};
  }
  return out;
}

json storage_section(const full_result& r, const request_tally& t) {
  const storage_report& p = r.storage;
  json out = {{"hit_blocks", at(t.tier_blocks, tier::storage)}, {"stored_blocks", p.stored},
              {"capacity_blocks", p.capacity}, {"exists_queries", p.exists_queries},
              {"gets", p.gets}, {"puts", p.puts}, {"backend", p.backend},
              {"read_service_s", seconds6(p.read_service_ns)},
              {"write_service_s", seconds6(p.write_service_ns)},
              {"modelled_read_service_s", seconds6(p.modelled_read_service_ns)},
              {"modelled_write_service_s", seconds6(p.modelled_write_service_ns)},
              {"payload_bytes_read", p.bytes_read}, {"payload_bytes_written", p.bytes_written},
              {"puts_dropped", p.puts_dropped}, {"misses", p.misses},
              {"rollbacks", p.rollbacks}, {"corrupt", p.corrupt},
              {"payload_errors", r.engine.payload_errors},
              {"node_downs", p.node_downs}, {"reconnects", p.reconnects},
              {"removed", p.removed}, {"open_leases", p.open_leases},
              {"pending_requests", p.pending},
              {"puts_no_room", p.puts_no_room},
              {"deletes_in_flight_max", p.deletes_in_flight_max},
              {"reconciles", p.reconciles}, {"blocks_lost", p.blocks_lost},
              {"put_error", p.put_error},
              {"backpressure", {{"waits", r.engine.store_waits},
                                {"wait_s", seconds6(r.engine.store_wait_ns)},
                                {"inflight_peak_bytes", r.engine.storage_inflight_peak_bytes}}}};
  if (p.backend != "model") {  // a real pool's deletes and connections (docs/robustness.md)
    out["deletes"] = {{"failed", p.deletes_failed}, {"retried", p.deletes_retried},
                      {"owed", p.deletes_owed}, {"orphans_removed", p.orphans_removed}};
    out["auth_failures"] = p.auth_failures;
    out["tls_failures"] = p.tls_failures;
  }
  const scheduler_report& s = r.scheduler;
  if (s.output_cache_writes > 0)
    out["output_cache"] = {{"requests", s.output_cache_writes},
                           {"blocks", s.output_cache_blocks}};
  return out;
}

json simulation_section(const full_result& r, const run_info& run) {
  const scheduler_report& s = r.scheduler;
  double virtual_s = static_cast<double>(r.last_event_ns) / 1e9;
  double wall = run.deterministic ? 0.0 : run.wall_s;
  double lag_s = static_cast<double>(s.lag_ns) / 1e9;
  return {{"virtual_s", round6(virtual_s)}, {"messages", r.messages},
          {"virtual_s_per_wall_s", wall > 0 ? round6(virtual_s / wall) : 0.0},
          {"messages_per_s", wall > 0 ? round6(static_cast<double>(r.messages) / wall) : 0.0},
          {"lag_s", round6(lag_s)},
          {"lag_max_ms", round6(static_cast<double>(s.lag_max_ns) / 1e6)},
          {"lag_share", virtual_s > 0 ? round6(lag_s / virtual_s) : 0.0},
          {"drained", s.drained}};
}

}  // namespace kvtier
