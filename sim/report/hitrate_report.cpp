#include "sim/report/hitrate_report.hpp"

#include <cmath>
#include <cstdio>

#include "core/time_math.hpp"
#include "sim/report/atomic_file.hpp"

namespace kvtier {

using nlohmann::json;

namespace {

std::string thousands(uint64_t v) {
  std::string s = std::to_string(v);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3)
    s.insert(static_cast<size_t>(i), ",");
  return s;
}

}  // namespace

double ratio(uint64_t part, uint64_t whole) {
  if (whole == 0)
    return 0.0;
  return std::round(static_cast<double>(part) / static_cast<double>(whole) * 1e6) / 1e6;
}

void write_hitrate_csv_header(std::ostream& out) {
  out << "seq,file,line,arrival_s,input_tokens,output_tokens,blocks,"
         "device_hit_blocks,host_hit_blocks,storage_hit_blocks,"
         "device_hit_tokens,host_hit_tokens,storage_hit_tokens,uncached_blocks\n";
}

void write_hitrate_csv_row(std::ostream& out, const trace_request& r, const request_outcome& o,
                           double time_scale) {
  out << r.seq << ',' << r.file << ',' << r.line << ','
      << seconds_text(time_scaled(r.arrival_ns, time_scale)) << ','
      << r.input_tokens << ',' << r.output_tokens << ',' << o.blocks;
  for (tier t : all_tiers)
    out << ',' << at(o.hit_blocks, t);
  for (tier t : all_tiers)
    out << ',' << at(o.hit_tokens, t);
  out << ',' << o.uncached_blocks << '\n';
}

json hitrate_summary(const hitrate_replay& replay, const run_info& run) {
  const hitrate_totals& t = replay.totals();
  const cache_model& m = replay.model();
  const cache_counters& c = m.counters();
  json files = json::array();
  uint64_t skipped = 0;
  for (const auto& f : run.files) {
    files.push_back({{"path", f.path}, {"format", f.format}, {"requests", f.requests},
                     {"skipped_lines", f.skipped_lines}});
    skipped += f.skipped_lines;
  }
  uint64_t hit_blocks = 0, hit_tokens = 0;
  json by_tier = json::object(), hits_blocks = json::object(), hits_tokens = json::object();
  for (tier i : all_tiers) {
    hit_blocks += at(t.hit_blocks, i);
    hit_tokens += at(t.hit_tokens, i);
    by_tier[to_string(i)] = {{"blocks", ratio(at(t.hit_blocks, i), t.blocks)},
                             {"tokens", ratio(at(t.hit_tokens, i), t.input_tokens)}};
    hits_blocks[to_string(i)] = at(t.hit_blocks, i);
    hits_tokens[to_string(i)] = at(t.hit_tokens, i);
  }
  const invariant_report& inv = replay.invariants();
  const storage_index* storage = replay.storage();
  json summary = {
    {"mode", "hitrate"},
    {"trace", {{"files", files}, {"requests", t.requests}, {"blocks", t.blocks},
               {"input_tokens", t.input_tokens}, {"output_tokens", t.output_tokens},
               {"skipped_lines", skipped}}},
    {"hit_ratio", {{"blocks", ratio(hit_blocks, t.blocks)},
                   {"tokens", ratio(hit_tokens, t.input_tokens)},
                   {"by_tier", by_tier}}},
    {"hits", {{"blocks", hits_blocks}, {"tokens", hits_tokens}}},
    {"uncached_blocks", t.uncached_blocks},
    {"evictions", {{"device", c.device_evictions}, {"host", c.host_evictions},
                   {"storage", storage ? storage->evictions() : 0}}},
    {"transfers", {{"backups", c.backups}, {"backups_skipped", c.backups_skipped},
                   {"write_backs", c.write_backs}, {"swap_ins", c.swap_ins},
                   {"storage_loads", c.loads}, {"storage_stores", c.stores}}},
    {"occupancy", {{"device_blocks", m.pool(tier::device).used_count()},
                   {"host_blocks", m.pool(tier::host).used_count()},
                   {"storage_blocks", storage ? storage->size() : 0},
                   {"tree_nodes", m.tree().size()}}},
    {"cache_ops", {{"lookups", t.lookups}, {"device_inserts", t.inserts},
                   {"host_inserts", t.host_inserts}, {"storage_inserts", t.storage_inserts}}},
    {"invariants", {{"checked", inv.checked}, {"violations", inv.violations},
                    {"passes", replay.invariant_passes()}, {"messages", inv.messages}}},
    {"config", run.config},
    {"model", run.model},
    {"parse_s", run.deterministic ? 0.0 : run.parse_s},
    {"wall_s", run.deterministic ? 0.0 : run.wall_s},
  };
  return summary;
}

std::string hitrate_text(const json& s, const std::string& out_dir) {
  char line[256];
  std::string out;
  const json& tr = s["trace"];
  std::snprintf(line, sizeof(line), "kvtier replay (hitrate): %s requests, %s blocks, %s prompt tokens\n",
                thousands(tr["requests"].get<uint64_t>()).c_str(),
                thousands(tr["blocks"].get<uint64_t>()).c_str(),
                thousands(tr["input_tokens"].get<uint64_t>()).c_str());
  out += line;
  const json& h = s["hit_ratio"];
  std::snprintf(line, sizeof(line), "  hit ratio        blocks %.4f   tokens %.4f\n",
                h["blocks"].get<double>(), h["tokens"].get<double>());
  out += line;
  for (tier each : all_tiers) {
    const char* tier = to_string(each);
    std::snprintf(line, sizeof(line), "    %-13s  blocks %.4f   tokens %.4f\n", tier,
                  h["by_tier"][tier]["blocks"].get<double>(),
                  h["by_tier"][tier]["tokens"].get<double>());
    out += line;
  }
  const json& e = s["evictions"];
  std::snprintf(line, sizeof(line), "  evictions        device %s   host %s   storage %s\n",
                thousands(e["device"].get<uint64_t>()).c_str(),
                thousands(e["host"].get<uint64_t>()).c_str(),
                thousands(e["storage"].get<uint64_t>()).c_str());
  out += line;
  const json& x = s["transfers"];
  std::snprintf(line, sizeof(line),
                "  transfers        backups %s   write-backs %s   swap-ins %s   storage loads %s   stores %s\n",
                thousands(x["backups"].get<uint64_t>()).c_str(),
                thousands(x["write_backs"].get<uint64_t>()).c_str(),
                thousands(x["swap_ins"].get<uint64_t>()).c_str(),
                thousands(x["storage_loads"].get<uint64_t>()).c_str(),
                thousands(x["storage_stores"].get<uint64_t>()).c_str());
  out += line;
  const json& inv = s["invariants"];
  std::snprintf(line, sizeof(line), "  invariants       %s checked, %s violations\n",
                thousands(inv["checked"].get<uint64_t>()).c_str(),
                thousands(inv["violations"].get<uint64_t>()).c_str());
  out += line;
  std::snprintf(line, sizeof(line), "  wall             %.3f s (parse %.3f s)\n",
                s["wall_s"].get<double>(), s["parse_s"].get<double>());
  out += line;
  out += "  outputs          " + out_dir + "/summary.json, " + out_dir + "/requests.csv\n";
  return out;
}

}  // namespace kvtier
