#include "sim/report/full_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sim/report/atomic_file.hpp"
#include "sim/report/load_check.hpp"

namespace kvtier {

using nlohmann::json;

namespace {

double round6(double x) {
  return std::round(x * 1e6) / 1e6;
}

std::string time_or_empty(int64_t ns) {
  return ns < 0 ? std::string{} : seconds_text(ns);
}

json distribution(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v)
    sum += x;
  return {{"count", v.size()},
          {"mean", round6(v.empty() ? 0 : sum / static_cast<double>(v.size()))},
          {"p50", round6(percentile(v, 50))},
          {"p90", round6(percentile(v, 90))},
          {"p99", round6(percentile(v, 99))}};
}

// One instance of a cluster: its requests' latency and hits, its own traffic and evictions.
json instance_summary(const instance_result& x) {
  std::vector<double> ttft, tpot;
  uint64_t finished = 0, input = 0;
  per_tier<uint64_t> tier_tokens{};
  for (const request_record& q : x.scheduler.requests) {
    if (q.finish_ns < 0)
      continue;
    ++finished;
    input += q.input_tokens;
    for (tier t : all_tiers)
      at(tier_tokens, t) += at(q.hit_tokens, t);
    ttft.push_back(static_cast<double>(q.first_token_ns - q.arrival_ns) / 1e6);
    if (q.output_tokens > 1)
      tpot.push_back(static_cast<double>(q.finish_ns - q.first_token_ns) / 1e6
                     / static_cast<double>(q.output_tokens - 1));
  }
  json by_tier = json::object();
  for (tier t : all_tiers)
    by_tier[to_string(t)] = ratio(at(tier_tokens, t), input);
  const engine_report& e = x.engine;
  return {{"name", x.name},
          {"requests", {{"finished", finished}, {"rejected", x.scheduler.rejected}}},
          {"hit_ratio_tokens", by_tier},
          {"latency_ms", {{"ttft", distribution(ttft)}, {"tpot", distribution(tpot)}}},
          {"traffic", {{"h2d_bytes", at(e.bytes, transfer_kind::swap_in)},
                       {"d2h_bytes", d2h_bytes(e)},
                       {"storage_read_bytes", at(e.bytes, transfer_kind::load)},
                       {"storage_write_bytes", at(e.bytes, transfer_kind::store)}}},
          {"evictions", {{"device", x.controller.device_evictions},
                         {"host", x.controller.host_evictions}}},
          {"preemptions", x.scheduler.preemptions},
          {"steps", x.scheduler.steps},
          {"invariant_violations", x.controller.invariant_violations}};
}

// PD: the handoffs, their latency, failures and bytes per link, and latency per role.
json pd_summary(const full_result& r) {
  const front_end_report& f = r.front_end;
  const scheduler_report& s = r.scheduler;
  std::vector<double> handoff, ttft, tpot;
  for (int64_t ns : f.handoff_ns)
    handoff.push_back(static_cast<double>(ns) / 1e6);
  // Later passes of a request a decode instance dropped re-prefill it: its first token came
  // from the first pass, and its TPOT spans every pass (the joined records).
  uint64_t passes = 0, reprefilled = 0;
  per_tier<uint64_t> restored{};
  for (const instance_result& x : r.instances)
    for (const request_record& q : x.scheduler.requests) {
      if (x.role != pd_role::prefill)
        continue;
      if (q.attempt == 0) {
        if (q.first_token_ns >= 0)
          ttft.push_back(static_cast<double>(q.first_token_ns - q.arrival_ns) / 1e6);
        continue;
      }
      ++passes;
      reprefilled += q.computed_tokens;
      for (tier t : all_tiers)
        at(restored, t) += at(q.first_hit_tokens, t);
    }
  for (const request_record& q : s.requests)
    if (q.finish_ns >= 0 && q.output_tokens > 1)
      tpot.push_back(static_cast<double>(q.finish_ns - q.first_token_ns) / 1e6
                     / static_cast<double>(q.output_tokens - 1));
  uint64_t nic = 0, media_read = 0, media_written = 0;
  for (const link_report& l : r.engine.links)
    if (l.name == "nic")
      nic += l.bytes;
  for (const link_report& l : r.storage.nodes) {
    bool read = l.name.size() > 5 && l.name.compare(l.name.size() - 5, 5, ".read") == 0;
    (read ? media_read : media_written) += l.bytes;
  }
  json out = {
    {"transfer", to_string(r.pd_mode)},
    {"handoffs", f.handoff_ns.size() + f.handoff_failures},
    {"handoff_latency_ms", distribution(handoff)},
    {"preallocations", {{"granted", s.preallocations}, {"refused", f.preallocation_refusals}}},
    {"failures", {{"handoffs", f.handoff_failures},
                  {"errored", f.handoff_failures - f.recomputed},
                  {"recomputed", f.recomputed},
                  {"injected", f.injected_failures},
                  {"storage_read_failures", s.handoff_read_failures},
                  {"decode_resource_timeouts", f.decode_resource_timeouts}}},
    {"blocks", {{"sent", s.handoff_blocks_sent}, {"skipped", s.handoff_blocks_skipped},
                {"storage_reads", s.handoff_reads}}},
    {"bytes", {{"pd_link", s.pd_link_bytes}, {"nic", nic},
               {"storage_media_read", media_read}, {"storage_media_written", media_written}}},
    {"pd_link_busy_s", round6(static_cast<double>(s.pd_link_busy_ns) / 1e9)},
    {"latency_ms", {{"prefill", {{"ttft", distribution(ttft)}}},
                    {"decode", {{"tpot", distribution(tpot)}}}}},
  };
  if (s.decode_drops == 0 && f.rerouted == 0)
    return out;  // only runs where a decode instance dropped a request carry the section
  out["decode_drops"] = {
    {"dropped", s.decode_drops},
    {"rerouted", f.rerouted},
    {"saved", f.rerouted_saved},
    {"saved_blocks", s.decode_drop_write_blocks},
    {"write_timeouts", s.decode_drop_write_timeouts},
    {"write_wait_s", round6(static_cast<double>(s.decode_drop_write_wait_ns) / 1e9)},
    {"reprefills", passes},
    {"reprefill_computed_tokens", reprefilled},
    {"reprefill_restored_tokens",
     {{"device", restored[0]}, {"host", restored[1]}, {"storage", restored[2]}}},
  };
  return out;
}

}  // namespace

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty())
    return 0;
  auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size(), std::max<size_t>(rank, 1)) - 1];
}

void write_full_csv(std::ostream& out, const full_result& r) {
  out << "seq,file,line,arrival_s,ready_s,admitted_s,first_token_s,finish_s,"
         "input_tokens,output_tokens,blocks,device_hit_blocks,host_hit_blocks,storage_hit_blocks,"
         "device_hit_tokens,host_hit_tokens,storage_hit_tokens,computed_tokens,preemptions,"
         "first_hit_blocks,first_hit_tokens\n";
  for (const request_record& x : r.scheduler.requests) {
    out << x.req << ',' << x.file << ',' << x.line << ',' << seconds_text(x.arrival_ns) << ','
        << time_or_empty(x.ready_ns) << ',' << time_or_empty(x.admitted_ns) << ','
        << time_or_empty(x.first_token_ns) << ',' << time_or_empty(x.finish_ns) << ','
        << x.input_tokens << ',' << x.output_tokens << ',' << x.blocks;
    for (uint32_t b : x.hit_blocks)
      out << ',' << b;
    for (uint64_t t : x.hit_tokens)
      out << ',' << t;
    uint64_t first_blocks = 0, first_tokens = 0;
    for (int t = 0; t < 3; ++t) {
      first_blocks += x.first_hit_blocks[t];
      first_tokens += x.first_hit_tokens[t];
    }
    out << ',' << x.computed_tokens << ',' << x.preemptions << ',' << first_blocks << ','
        << first_tokens << '\n';
  }
}

// A text key of the effective config ("" where the config given has none).
static std::string config_text(const json& config, const char* section, const char* key) {
  if (!config.is_object() || !config.contains(section) || !config[section].is_object())
    return "";
  const json& s = config[section];
  return s.contains(key) && s[key].is_string() ? s[key].get<std::string>() : "";
}

json full_summary(const full_result& r, const run_info& run,
                  const std::vector<trace_file_info>& files) {
  const scheduler_report& s = r.scheduler;
  std::vector<double> ttft, tpot, e2e, queue;
  // Requests preempted at least once, and the rest: what preemption costs those it hits.
  std::vector<double> preempted_ttft, preempted_e2e, other_ttft, other_e2e;
  uint64_t finished = 0, blocks = 0, input = 0, output = 0, hit_blocks = 0, hit_tokens = 0;
  per_tier<uint64_t> tier_blocks{}, tier_tokens{};
  uint64_t rejected_input = 0, rejected_output = 0;
  uint64_t readmitted = 0, readmission_blocks = 0, readmission_tokens = 0;
  int64_t first_arrival = INT64_MAX, last_finish = 0;
  for (const request_record& x : s.requests) {
    first_arrival = std::min(first_arrival, x.arrival_ns);
    if (x.rejected) {
      rejected_input += x.input_tokens;
      rejected_output += x.output_tokens;
    }
    if (x.finish_ns < 0)
      continue;
    ++finished;
    last_finish = std::max(last_finish, x.finish_ns);
    blocks += x.blocks;
    input += x.input_tokens;
    output += x.output_tokens;
    // Hits found when the request was first admitted: what the cache saved it. After a
    // preemption its last admission also finds its own blocks, computed before it was preempted;
    // those are reported apart, as readmission hits.
    for (tier t : all_tiers) {
      at(tier_blocks, t) += at(x.first_hit_blocks, t);
      at(tier_tokens, t) += at(x.first_hit_tokens, t);
      hit_blocks += at(x.first_hit_blocks, t);
      hit_tokens += at(x.first_hit_tokens, t);
    }
    if (x.preemptions > 0) {
      ++readmitted;
      for (tier t : all_tiers) {
        readmission_blocks += at(x.hit_blocks, t);
        readmission_tokens += at(x.hit_tokens, t);
      }
    }
    ttft.push_back(static_cast<double>(x.first_token_ns - x.arrival_ns) / 1e6);
    e2e.push_back(static_cast<double>(x.finish_ns - x.arrival_ns) / 1e6);
    (x.preemptions > 0 ? preempted_ttft : other_ttft).push_back(ttft.back());
    (x.preemptions > 0 ? preempted_e2e : other_e2e).push_back(e2e.back());
    queue.push_back(static_cast<double>(x.admitted_ns - x.arrival_ns) / 1e6);
    if (x.output_tokens > 1)
      tpot.push_back(static_cast<double>(x.finish_ns - x.first_token_ns) / 1e6
                     / static_cast<double>(x.output_tokens - 1));
  }
  double makespan = finished ? static_cast<double>(last_finish - first_arrival) / 1e9 : 0;
  auto per_s = [&](double v) { return round6(makespan > 0 ? v / makespan : 0); };
  json by_tier = json::object(), hits_blocks = json::object(), hits_tokens = json::object();
  for (tier t : all_tiers) {
    by_tier[to_string(t)] = {{"blocks", ratio(at(tier_blocks, t), blocks)},
                             {"tokens", ratio(at(tier_tokens, t), input)}};
    hits_blocks[to_string(t)] = at(tier_blocks, t);
    hits_tokens[to_string(t)] = at(tier_tokens, t);
  }
  json links = json::array();
  for (const auto& l : r.engine.links)
    links.push_back({{"name", l.name}, {"bytes", l.bytes},
                     {"busy_s", round6(static_cast<double>(l.busy_ns) / 1e9)},
                     {"transfers", l.transfers}});
  for (const auto& l : r.storage.nodes)
    links.push_back({{"name", l.name}, {"bytes", l.bytes},
                     {"busy_s", round6(static_cast<double>(l.busy_ns) / 1e9)},
                     {"transfers", l.transfers}});
  json file_list = json::array();
  uint64_t skipped = 0;
  for (const auto& f : files) {
    file_list.push_back({{"path", f.path}, {"format", f.format}, {"requests", f.requests},
                         {"skipped_lines", f.skipped_lines}});
    skipped += f.skipped_lines;
  }
  // Transfer time per kind: from each transfer's start (its dependencies met) to its end, as
  // the modelled links computed it or as CUDA events measured it.
  per_transfer_kind<double> kind_ns{};
  for (const transfer_log& l : r.engine.log)
    at(kind_ns, l.kind) += static_cast<double>(l.duration_ns);
  const double h2d_ns = at(kind_ns, transfer_kind::swap_in);
  const double d2h_ns = at(kind_ns, transfer_kind::backup) + at(kind_ns, transfer_kind::write_back);
  auto rate = [&](uint64_t bytes, double ns) {
    return round6(ns > 0 ? static_cast<double>(bytes) / ns : 0.0);
  };
  const controller_report& c = r.controller;
  json preemption = {
    {"mode", config_text(run.config, "scheduler", "preemption")},
    {"count", s.preemptions},
    {"requests", preempted_ttft.size()},
    {"recomputed_tokens", s.recomputed_tokens},
    {"restored_tokens", {{"device", at(s.restored_tokens, tier::device)},
                         {"host", at(s.restored_tokens, tier::host)},
                         {"storage", at(s.restored_tokens, tier::storage)}}},
    {"saved_blocks", c.preemption.saved_blocks},
    {"unsaved_blocks", c.preemption.unsaved_blocks},
    {"named_blocks", c.preemption.named_blocks},
    {"d2h_bytes", c.preemption.d2h_blocks * run.block_bytes},
    {"storage_write_bytes", c.preemption.stored_blocks * run.block_bytes},
    {"readmission_lookups", c.preemption.readmission_lookups},
    {"latency_ms", {{"preempted", {{"ttft", distribution(preempted_ttft)},
                                   {"e2e", distribution(preempted_e2e)}}},
                    {"not_preempted", {{"ttft", distribution(other_ttft)},
                                       {"e2e", distribution(other_e2e)}}}}},
  };
  json prefetch = {
    {"policy", config_text(run.config, "storage", "prefetch_policy")},
    {"started", c.prefetch.started},
    {"below_threshold", c.prefetch.below_threshold},
    {"ready_early", c.prefetch.ready_early},
    {"timeouts", c.prefetch.timeouts},
    {"protected_holds", c.prefetch.protected_holds},
    {"protected_released", c.prefetch.protected_released},
  };
  double virtual_s = static_cast<double>(r.last_event_ns) / 1e9;
  double wall = run.deterministic ? 0.0 : run.wall_s;
  json summary = {
    {"mode", "full"},
    {"trace", {{"files", file_list}, {"requests", s.requests.size()},
               {"blocks", run.trace.blocks}, {"input_tokens", run.trace.input_tokens},
               {"output_tokens", run.trace.output_tokens}, {"skipped_lines", skipped}}},
    {"requests", {{"finished", finished}, {"rejected", s.rejected},
                  {"unfinished", s.requests.size() - finished - s.rejected},
                  {"finished_blocks", blocks}, {"finished_input_tokens", input},
                  {"finished_output_tokens", output},
                  {"rejected_input_tokens", rejected_input},
                  {"rejected_output_tokens", rejected_output}}},
    {"hit_ratio", {{"blocks", ratio(hit_blocks, blocks)}, {"tokens", ratio(hit_tokens, input)},
                   {"by_tier", by_tier}}},
    {"hits", {{"blocks", hits_blocks}, {"tokens", hits_tokens}}},
    {"readmission_hits", {{"requests", readmitted}, {"blocks", readmission_blocks},
                          {"tokens", readmission_tokens}}},
    {"latency_ms", {{"ttft", distribution(ttft)}, {"tpot", distribution(tpot)},
                    {"e2e", distribution(e2e)}, {"queue", distribution(queue)}}},
    {"throughput", {{"makespan_s", round6(makespan)},
                    {"requests_per_s", per_s(static_cast<double>(finished))},
                    {"input_tokens_per_s", per_s(static_cast<double>(input))},
                    {"output_tokens_per_s", per_s(static_cast<double>(output))}}},
    {"preemptions", s.preemptions},
    {"recomputed_tokens", s.recomputed_tokens},
    {"preemption", preemption},
    {"prefetch", prefetch},
    {"steps", {{"count", s.steps}, {"probes", s.probes},
               {"refused_admissions", s.refused_admissions},
               {"busy_s", round6(static_cast<double>(s.busy_ns) / 1e9)},
               {"layer_wait_s", round6(static_cast<double>(s.layer_wait_ns) / 1e9)},
               {"prefill_tokens", s.prefill_tokens}, {"decode_tokens", s.decode_tokens}}},
    {"traffic", {{"h2d_bytes", at(r.engine.bytes, transfer_kind::swap_in)},
                 {"d2h_bytes", d2h_bytes(r.engine)},
                 {"storage_read_bytes", at(r.engine.bytes, transfer_kind::load)},
                 {"storage_write_bytes", at(r.engine.bytes, transfer_kind::store)},
                 {"backend", r.engine.backend}, {"device", r.engine.device},
                 {"h2d_transfer_s", round6(h2d_ns / 1e9)},
                 {"d2h_transfer_s", round6(d2h_ns / 1e9)},
                 {"h2d_gbps", rate(at(r.engine.bytes, transfer_kind::swap_in), h2d_ns)},
                 {"d2h_gbps", rate(d2h_bytes(r.engine), d2h_ns)},
                 {"links", links}}},
    {"transfers", {{"swap_ins", c.swap_ins}, {"backups", c.backups},
                   {"backups_skipped", c.backups_skipped}, {"write_backs", c.write_backs},
                   {"storage_loads", c.loads}, {"storage_stores", c.stores},
                   {"failed_loads", c.failed_loads}, {"batches", c.transfers}}},
    {"evictions", {{"device", c.device_evictions}, {"host", c.host_evictions},
                   {"storage", r.storage.evictions}}},
    {"storage", {{"hit_blocks", at(tier_blocks, tier::storage)}, {"stored_blocks", r.storage.stored},
                 {"capacity_blocks", r.storage.capacity}, {"exists_queries", r.storage.exists_queries},
                 {"gets", r.storage.gets}, {"puts", r.storage.puts},
                 {"backend", r.storage.backend},
                 {"read_service_s", round6(static_cast<double>(r.storage.read_service_ns) / 1e9)},
                 {"write_service_s", round6(static_cast<double>(r.storage.write_service_ns) / 1e9)},
                 {"modelled_read_service_s",
                  round6(static_cast<double>(r.storage.modelled_read_service_ns) / 1e9)},
                 {"modelled_write_service_s",
                  round6(static_cast<double>(r.storage.modelled_write_service_ns) / 1e9)},
                 {"payload_bytes_read", r.storage.bytes_read},
                 {"payload_bytes_written", r.storage.bytes_written},
                 {"puts_dropped", r.storage.puts_dropped}, {"misses", r.storage.misses},
                 {"rollbacks", r.storage.rollbacks}, {"corrupt", r.storage.corrupt},
                 {"payload_errors", r.engine.payload_errors},
                 {"node_downs", r.storage.node_downs}, {"reconnects", r.storage.reconnects},
                 {"removed", r.storage.removed}, {"open_leases", r.storage.open_leases},
                 {"pending_requests", r.storage.pending}}},
    {"invariants", {{"checked", c.invariant_checked}, {"violations", c.invariant_violations},
                    {"messages", c.invariant_messages}}},
    {"simulation", {{"virtual_s", round6(virtual_s)}, {"messages", r.messages},
                    {"virtual_s_per_wall_s", wall > 0 ? round6(virtual_s / wall) : 0.0},
                    {"messages_per_s", wall > 0 ? round6(static_cast<double>(r.messages) / wall) : 0.0},
                    {"lag_s", round6(static_cast<double>(s.lag_ns) / 1e9)},
                    {"lag_max_ms", round6(static_cast<double>(s.lag_max_ns) / 1e6)},
                    {"lag_share", virtual_s > 0 ? round6(static_cast<double>(s.lag_ns) / 1e9 / virtual_s) : 0.0},
                    {"drained", s.drained}}},
    {"load", load_check(s.requests)},
    {"config", run.config},
    {"parse_s", run.deterministic ? 0.0 : run.parse_s},
    {"wall_s", wall},
  };
  if (s.output_cache_writes > 0)
    summary["storage"]["output_cache"] = {{"requests", s.output_cache_writes},
                                          {"blocks", s.output_cache_blocks}};
  if (r.disaggregated) {
    // D may reject a request (it could never fit there) before any prefill instance sees it.
    uint64_t failed = r.front_end.failed, rejected = r.front_end.rejected;
    summary["requests"]["failed"] = failed;
    summary["requests"]["rejected"] = rejected;
    summary["requests"]["unfinished"] = s.requests.size() - finished - rejected - failed;
    summary["pd"] = pd_summary(r);
  }
  if (!r.instances.empty()) {
    json per_instance = json::array();
    for (size_t i = 0; i < r.instances.size(); ++i) {
      per_instance.push_back(instance_summary(r.instances[i]));
      per_instance.back()["routed"] = r.front_end.per_instance[i];
      if (r.disaggregated)
        per_instance.back()["role"] = to_string(r.instances[i].role);
    }
    summary["instances"] = per_instance;
  }
  return summary;
}

std::string full_text(const json& s, const std::string& out_dir) {
  char line[320];
  std::string out;
  auto add = [&](const char* fmt, auto... args) {
    std::snprintf(line, sizeof(line), fmt, args...);
    out += line;
  };
  const json& rq = s["requests"];
  add("kvtier replay (full): %llu requests finished (%llu rejected, %llu unfinished) in %.1f s of "
      "virtual time\n",
      rq["finished"].get<unsigned long long>(), rq["rejected"].get<unsigned long long>(),
      rq["unfinished"].get<unsigned long long>(), s["simulation"]["virtual_s"].get<double>());
  const json& load = s["load"];
  if (load["overloaded"].get<bool>()) {
    const json& w = load["queue_wait_s_by_quarter"];
    add("  OVERLOADED      the queue grew through the run (median wait %.1f s in the first "
        "quarter of arrivals, %.1f s in the last): these figures measure queueing, not caching; "
        "raise trace.time_scale\n",
        w[0].get<double>(), w[3].get<double>());
  }
  const json& l = s["latency_ms"];
  for (const char* k : {"ttft", "tpot", "e2e"})
    add("  %-5s ms        mean %10.1f   p50 %10.1f   p90 %10.1f   p99 %10.1f\n", k,
        l[k]["mean"].get<double>(), l[k]["p50"].get<double>(), l[k]["p90"].get<double>(),
        l[k]["p99"].get<double>());
  const json& t = s["throughput"];
  add("  throughput      %.3f req/s   %.0f input tok/s   %.0f output tok/s\n",
      t["requests_per_s"].get<double>(), t["input_tokens_per_s"].get<double>(),
      t["output_tokens_per_s"].get<double>());
  const json& h = s["hit_ratio"];
  add("  hit ratio       blocks %.4f   tokens %.4f   (device %.4f, host %.4f, storage %.4f)\n",
      h["blocks"].get<double>(), h["tokens"].get<double>(),
      h["by_tier"]["device"]["tokens"].get<double>(), h["by_tier"]["host"]["tokens"].get<double>(),
      h["by_tier"]["storage"]["tokens"].get<double>());
  const json& tr = s["traffic"];
  add("  traffic GB      h2d %.2f   d2h %.2f   storage read %.2f   storage write %.2f\n",
      tr["h2d_bytes"].get<double>() / 1e9, tr["d2h_bytes"].get<double>() / 1e9,
      tr["storage_read_bytes"].get<double>() / 1e9, tr["storage_write_bytes"].get<double>() / 1e9);
  add("  transfers (%s%s%s)  h2d %.3f s at %.1f GB/s   d2h %.3f s at %.1f GB/s\n",
      tr["backend"].get<std::string>().c_str(), tr["device"].get<std::string>().empty() ? "" : ", ",
      tr["device"].get<std::string>().c_str(), tr["h2d_transfer_s"].get<double>(),
      tr["h2d_gbps"].get<double>(), tr["d2h_transfer_s"].get<double>(), tr["d2h_gbps"].get<double>());
  const json& st = s["steps"];
  add("  steps           %llu   busy %.1f s   layer-wait stall %.3f s   preemptions %llu\n",
      st["count"].get<unsigned long long>(), st["busy_s"].get<double>(),
      st["layer_wait_s"].get<double>(), s["preemptions"].get<unsigned long long>());
  const json& pr = s["preemption"];
  if (pr["count"].get<unsigned long long>() > 0) {
    const json& back = pr["restored_tokens"];
    add("  preemption      %s: %llu requests   recomputed %llu tokens   restored tokens device %llu "
        "host %llu storage %llu   saved GB d2h %.2f storage %.2f\n",
        pr["mode"].get<std::string>().c_str(), pr["requests"].get<unsigned long long>(),
        pr["recomputed_tokens"].get<unsigned long long>(), back["device"].get<unsigned long long>(),
        back["host"].get<unsigned long long>(), back["storage"].get<unsigned long long>(),
        pr["d2h_bytes"].get<double>() / 1e9, pr["storage_write_bytes"].get<double>() / 1e9);
  }
  const json& e = s["evictions"];
  add("  evictions       device %llu   host %llu   storage %llu\n",
      e["device"].get<unsigned long long>(), e["host"].get<unsigned long long>(),
      e["storage"].get<unsigned long long>());
  const json& sp = s["storage"];
  if (sp["backend"] != "model")
    add("  storage (%s)  %.3f GB read, %.3f GB written   %llu puts dropped   %llu misses   "
        "%llu payload errors   %llu node downs\n",
        sp["backend"].get<std::string>().c_str(), sp["payload_bytes_read"].get<double>() / 1e9,
        sp["payload_bytes_written"].get<double>() / 1e9,
        sp["puts_dropped"].get<unsigned long long>(), sp["misses"].get<unsigned long long>(),
        sp["payload_errors"].get<unsigned long long>(), sp["node_downs"].get<unsigned long long>());
  const json& inv = s["invariants"];
  add("  invariants      %llu checked, %llu violations\n",
      inv["checked"].get<unsigned long long>(), inv["violations"].get<unsigned long long>());
  const json& sim = s["simulation"];
  add("  wall            %.3f s   (%.0f virtual s per wall s, %.2f M messages/s)\n",
      s["wall_s"].get<double>(), sim["virtual_s_per_wall_s"].get<double>(),
      sim["messages_per_s"].get<double>() / 1e6);
  if (sim["lag_s"].get<double>() > 0)
    add("  clock lag       %.3f s   (%.1f%% of virtual time, longest %.3f ms)\n",
        sim["lag_s"].get<double>(), sim["lag_share"].get<double>() * 100,
        sim["lag_max_ms"].get<double>());
  out += "  outputs         " + out_dir + "/summary.json, " + out_dir + "/requests.csv\n";
  return out;
}

}  // namespace kvtier
