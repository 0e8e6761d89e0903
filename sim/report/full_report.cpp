#include "sim/report/full_report.hpp"

#include <cstdio>

#include "sim/report/atomic_file.hpp"
#include "sim/report/load_check.hpp"
#include "sim/report/request_tally.hpp"
#include "sim/report/summary_sections.hpp"

namespace kvtier {

using nlohmann::json;

namespace {

std::string time_or_empty(int64_t ns) {
  return ns < 0 ? std::string{} : seconds_text(ns);
}

// The terminal text, built a printf line at a time.
struct text_lines {
  template <typename... Args>
  void add(const char* fmt, Args... args) {
    std::snprintf(line, sizeof(line), fmt, args...);
    out += line;
  }

  char line[320];
  std::string out;
};

// How many requests finished, and whether the queue, not the cache, shaped the figures.
void add_outcome(text_lines& text, const json& s) {
  const json& rq = s["requests"];
  text.add("kvtier replay (full): %llu requests finished (%llu rejected, %llu unfinished) in "
           "%.1f s of virtual time\n",
           rq["finished"].get<unsigned long long>(), rq["rejected"].get<unsigned long long>(),
           rq["unfinished"].get<unsigned long long>(), s["simulation"]["virtual_s"].get<double>());
  text.out += load_text(s["load"]);  // overload, clock lag, L3 backpressure: each with advice
}

void add_speed(text_lines& text, const json& s) {
  const json& l = s["latency_ms"];
  for (const char* k : {"ttft", "tpot", "e2e"})
    text.add("  %-5s ms        mean %10.1f   p50 %10.1f   p90 %10.1f   p99 %10.1f\n", k,
             l[k]["mean"].get<double>(), l[k]["p50"].get<double>(), l[k]["p90"].get<double>(),
             l[k]["p99"].get<double>());
  const json& t = s["throughput"];
  text.add("  throughput      %.3f req/s   %.0f input tok/s   %.0f output tok/s\n",
           t["requests_per_s"].get<double>(), t["input_tokens_per_s"].get<double>(),
           t["output_tokens_per_s"].get<double>());
}

// Hits, and the bytes that moved between the tiers.
void add_cache(text_lines& text, const json& s) {
  const json& h = s["hit_ratio"];
  const json& by_tier = h["by_tier"];
  text.add("  hit ratio       blocks %.4f   tokens %.4f   (device %.4f, host %.4f, storage %.4f)\n",
           h["blocks"].get<double>(), h["tokens"].get<double>(),
           by_tier["device"]["tokens"].get<double>(), by_tier["host"]["tokens"].get<double>(),
           by_tier["storage"]["tokens"].get<double>());
  const json& tr = s["traffic"];
  text.add("  traffic GB      h2d %.2f   d2h %.2f   storage read %.2f   storage write %.2f\n",
           tr["h2d_bytes"].get<double>() / 1e9, tr["d2h_bytes"].get<double>() / 1e9,
           tr["storage_read_bytes"].get<double>() / 1e9,
           tr["storage_write_bytes"].get<double>() / 1e9);
  text.add("  transfers (%s%s%s)  h2d %.3f s at %.1f GB/s   d2h %.3f s at %.1f GB/s\n",
           tr["backend"].get<std::string>().c_str(),
           tr["device"].get<std::string>().empty() ? "" : ", ",
           tr["device"].get<std::string>().c_str(), tr["h2d_transfer_s"].get<double>(),
           tr["h2d_gbps"].get<double>(), tr["d2h_transfer_s"].get<double>(),
           tr["d2h_gbps"].get<double>());
  if (tr.contains("startup_s")) {
    const json& up = tr["startup_s"];
    text.add("  gpu start-up    %.1f s   (device memory %.1f s, host pinning %.1f s, compute "
             "calibration %.1f s)\n",
             up["total"].get<double>(), up["device_memory"].get<double>(),
             up["host_pinning"].get<double>(), up["compute_calibration"].get<double>());
  }
}

// The engine's steps, and what preemption and eviction cost them.
void add_work(text_lines& text, const json& s) {
  const json& st = s["steps"];
  text.add("  steps           %llu   busy %.1f s   layer-wait stall %.3f s   preemptions %llu\n",
           st["count"].get<unsigned long long>(), st["busy_s"].get<double>(),
           st["layer_wait_s"].get<double>(), s["preemptions"].get<unsigned long long>());
  const json& pr = s["preemption"];
  if (pr["count"].get<unsigned long long>() > 0) {
    const json& back = pr["restored_tokens"];
    text.add("  preemption      %s: %llu requests   recomputed %llu tokens   restored tokens "
             "device %llu host %llu storage %llu   saved GB d2h %.2f storage %.2f\n",
             pr["mode"].get<std::string>().c_str(), pr["requests"].get<unsigned long long>(),
             pr["recomputed_tokens"].get<unsigned long long>(),
             back["device"].get<unsigned long long>(), back["host"].get<unsigned long long>(),
             back["storage"].get<unsigned long long>(), pr["d2h_bytes"].get<double>() / 1e9,
             pr["storage_write_bytes"].get<double>() / 1e9);
  }
  const json& e = s["evictions"];
  text.add("  evictions       device %llu   host %llu   storage %llu\n",
           e["device"].get<unsigned long long>(), e["host"].get<unsigned long long>(),
           e["storage"].get<unsigned long long>());
}

// The storage backend's health, the invariants, and how the run kept up with its clock.
void add_checks(text_lines& text, const json& s) {
  const json& sp = s["storage"];
  if (sp["backend"] != "model")
    text.add("  storage (%s)  %.3f GB read, %.3f GB written   %llu puts dropped   %llu misses   "
             "%llu payload errors   %llu node downs\n",
             sp["backend"].get<std::string>().c_str(),
             sp["payload_bytes_read"].get<double>() / 1e9,
             sp["payload_bytes_written"].get<double>() / 1e9,
             sp["puts_dropped"].get<unsigned long long>(), sp["misses"].get<unsigned long long>(),
             sp["payload_errors"].get<unsigned long long>(),
             sp["node_downs"].get<unsigned long long>());
  const json& inv = s["invariants"];
  text.add("  invariants      %llu checked, %llu violations\n",
           inv["checked"].get<unsigned long long>(), inv["violations"].get<unsigned long long>());
  const json& sim = s["simulation"];
  text.add("  wall            %.3f s   (%.0f virtual s per wall s, %.2f M messages/s)\n",
           s["wall_s"].get<double>(), sim["virtual_s_per_wall_s"].get<double>(),
           sim["messages_per_s"].get<double>() / 1e6);
  if (sim["lag_s"].get<double>() > 0)
    text.add("  clock lag       %.3f s   (%.1f%% of virtual time, longest %.3f ms)\n",
             sim["lag_s"].get<double>(), sim["lag_share"].get<double>() * 100,
             sim["lag_max_ms"].get<double>());
}

load_inputs load_inputs_of(const full_result& r, const run_info& run) {
  load_inputs in;
  in.virtual_s = static_cast<double>(r.last_event_ns) / 1e9;
  in.lag_s = static_cast<double>(r.scheduler.lag_ns) / 1e9;
  in.store_wait_s = static_cast<double>(r.engine.store_wait_ns) / 1e9;
  in.inflight_peak_bytes = static_cast<double>(r.engine.storage_inflight_peak_bytes);
  in.time_scale = run.config.at("trace").value("time_scale", 1.0);
  return in;
}

}  // namespace

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
    for (tier t : all_tiers) {
      first_blocks += at(x.first_hit_blocks, t);
      first_tokens += at(x.first_hit_tokens, t);
    }
    out << ',' << x.computed_tokens << ',' << x.preemptions << ',' << first_blocks << ','
        << first_tokens << '\n';
  }
}

json full_summary(const full_result& r, const run_info& run,
                  const std::vector<trace_file_info>& files) {
  const scheduler_report& s = r.scheduler;
  const request_tally t = tally_requests(s.requests);
  json summary = {
    {"mode", "full"},
    {"trace", trace_section(r, run, files)},
    {"requests", requests_section(r, t)},
    {"hit_ratio", hit_ratio_section(t)},
    {"hits", hits_section(t)},
    {"readmission_hits", readmission_hits_section(t)},
    {"latency_ms", latency_section(t)},
    {"throughput", throughput_section(t)},
    {"preemptions", s.preemptions},
    {"recomputed_tokens", s.recomputed_tokens},
    {"preemption", preemption_section(r, run, t)},
    {"prefetch", prefetch_section(r, run)},
    {"steps", steps_section(s)},
    {"traffic", traffic_section(r)},
    {"transfers", transfers_section(r.controller)},
    {"evictions", evictions_section(r)},
    {"storage", storage_section(r, t)},
    {"invariants", invariants_section(r.controller)},
    {"simulation", simulation_section(r, run)},
    {"load", load_check(s.requests, load_inputs_of(r, run))},
    {"config", run.config},
    {"model", run.model},
    {"parse_s", run.deterministic ? 0.0 : run.parse_s},
    {"wall_s", run.deterministic ? 0.0 : run.wall_s},
  };
  if (r.disaggregated)
    summary["pd"] = pd_section(r);
  if (!r.instances.empty())
    summary["instances"] = instances_section(r);
  return summary;
}

std::string full_text(const json& s, const std::string& out_dir, bool timeseries) {
  text_lines text;
  add_outcome(text, s);
  add_speed(text, s);
  add_cache(text, s);
  add_work(text, s);
  add_checks(text, s);
  text.out += "  outputs         " + out_dir + "/summary.json, " + out_dir + "/requests.csv";
  if (timeseries)
    text.out += ", " + out_dir + "/timeseries.csv";
  text.out += "\n";
  return text.out;
}

}  // namespace kvtier
