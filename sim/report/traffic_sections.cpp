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
  double kind_ns[move_kinds] = {0, 0, 0, 0, 0};
  for (const transfer_log& l : e.log)
    kind_ns[l.kind] += static_cast<double>(l.duration_ns);
  auto bytes = [&](move_kind k) { return e.bytes[static_cast<int>(k)]; };
  auto seconds = [&](move_kind k) { return round6(kind_ns[static_cast<int>(k)] / 1e9); };
  auto rate = [&](move_kind k) {
    int i = static_cast<int>(k);
    return round6(kind_ns[i] > 0 ? static_cast<double>(e.bytes[i]) / kind_ns[i] : 0.0);
  };
  return {{"h2d_bytes", bytes(move_kind::swap_in)},
          {"d2h_bytes", bytes(move_kind::d2h)},
          {"storage_read_bytes", bytes(move_kind::load)},
          {"storage_write_bytes", bytes(move_kind::store)},
          {"backend", e.backend}, {"device", e.device},
          {"h2d_transfer_s", seconds(move_kind::swap_in)},
          {"d2h_transfer_s", seconds(move_kind::d2h)},
          {"h2d_gbps", rate(move_kind::swap_in)}, {"d2h_gbps", rate(move_kind::d2h)},
          {"links", link_list(r)}};
}

json storage_section(const full_result& r, const request_tally& t) {
  const storage_report& p = r.storage;
  json out = {{"hit_blocks", t.tier_blocks[2]}, {"stored_blocks", p.stored},
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
              {"pending_requests", p.pending}};
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
