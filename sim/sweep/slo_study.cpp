#include "sim/sweep/slo_study.hpp"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>

#include "runtime/config/keys.hpp"
#include "runtime/config/options.hpp"
#include "runtime/config/replay_config.hpp"
#include "sim/report/atomic_file.hpp"
#include "sim/sweep/flatten.hpp"
#include "sim/sweep/folder_lock.hpp"
#include "sim/sweep/rate_search.hpp"
#include "sim/sweep/sweep_dir.hpp"

namespace kvtier {

namespace {

using nlohmann::json;

struct search_state {
  sweep_cell base;
  axis_search axis;
  rate_search search;
  std::map<double, std::string> cells;  ///< rate -> the replay's cell id
};

config config_of(const sweep_cell& cell) {
  config c;
  c.merge_json(cell.config, "cell " + cell.id);
  return c;
}

std::string rate_label(double rate) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", rate);
  return buf;
}

// The search of one axis from its start: rates are x the recorded load, 1 / the time scale or
// the number of copies (whole ones, at most trace.session_copies' maximum).
rate_search search_from(const axis_search& a, double precision) {
  if (a.axis == search_axis::session_copies)
    return rate_search(a.start, precision, 12, {1, 4096});
  return rate_search(1.0 / a.start, precision);
}

// The configuration's replay at `rate` times the recorded load. The SLO's keys are left out of
// its config: they decide how a replay is judged, not what it does, so a change of limits
// reuses every replay already run.
sweep_cell cell_at(const search_state& st, double rate) {
  sweep_cell c = st.base;
  if (st.axis.axis == search_axis::session_copies)
    c.config["trace"]["session_copies"] = static_cast<int64_t>(rate);
  else
    c.config["trace"]["time_scale"] = 1.0 / rate;
  c.config.erase("slo");
  c.grid.emplace_back("rate_x", rate_label(rate));
  c.id = cell_identity(c);
  return c;
}

std::optional<json> summary_of(const std::string& dir, const std::string& id) {
  if (!cell_done(dir, id))
    return std::nullopt;
  std::ifstream in(cell_dir(dir, id) + "/summary.json");
  json j = json::parse(in, nullptr, false);
  return j.is_discarded() ? std::nullopt : std::optional<json>(j);
}

double p99_ms(const json& summary, const char* metric) {
  return summary.at("latency_ms").at(metric).value("p99", 0.0);
}

// Met: the replay finished every request it admitted, at least one, and both p99s are within
// the limits. A request too large for the device is rejected at every rate (docs/outputs.md,
// "--mode full"), so rejections do not judge the rate. A replay that failed (did not drain, broke
// an invariant) or had nothing to serve (a variant that kept no session) meets nothing.
bool met(const std::optional<json>& s, const slo_limits& limits) {
  if (!s)
    return false;
  const json& requests = s->at("requests");
  return requests.value("finished", 0) > 0 && requests.value("unfinished", 0) == 0 &&
         p99_ms(*s, "ttft") <= limits.ttft_p99_ms && p99_ms(*s, "tpot") <= limits.tpot_p99_ms;
}

slo_capacity capacity_of(const std::string& dir, const search_state& st) {
  slo_capacity row;
  row.grid = st.base.grid;
  row.outcome = to_string(st.search.state());
  row.sustained_rate = st.search.sustained();
  row.failing_rate = st.search.failing();
  row.iterations = st.search.iterations();
  row.searched_key = key_of(st.axis.axis);
  config base = config_of(st.base);
  row.time_scale = base.number(keys::trace::time_scale);
  row.session_copies = static_cast<double>(base.integer(keys::trace::session_copies));
  if (row.sustained_rate > 0 && st.axis.axis == search_axis::session_copies)
    row.session_copies = row.sustained_rate;
  else if (row.sustained_rate > 0)
    row.time_scale = 1.0 / row.sustained_rate;
  replay_config rc = resolve(config_of(st.base));
  double token_bytes = static_cast<double>(rc.model.bytes_per_token());
  row.device_bytes = token_bytes * rc.cache.device_blocks * rc.block_size;
  row.host_bytes = token_bytes * rc.cache.host_blocks * rc.block_size;
  row.storage_bytes = token_bytes * static_cast<double>(rc.storage_blocks) * rc.block_size;
  auto it = st.cells.find(row.sustained_rate);
  if (row.sustained_rate > 0 && it != st.cells.end()) {
    row.cell = it->second;
    if (auto s = summary_of(dir, row.cell)) {
      row.requests_per_s = s->at("throughput").value("requests_per_s", 0.0);
      row.ttft_p99_ms = p99_ms(*s, "ttft");
      row.tpot_p99_ms = p99_ms(*s, "tpot");
    }
  }
  return row;
}

void write_slo_outputs(const std::string& dir, const sweep_plan& plan,
                       const slo_study_result& r) {
  const char* figures[] = {"outcome", "sustained_rate_x", "time_scale", "requests_per_s",
                           "ttft_p99_ms", "tpot_p99_ms", "iterations", "failing_rate_x",
                           "device_bytes", "host_bytes", "storage_bytes", "cell",
                           "search_axis", "session_copies"};
  atomic_file csv(dir + "/slo.csv");
  std::vector<std::string> axes(plan.axes.begin(), plan.axes.end() - 1);  // all but rate_x
  for (const auto& a : axes)
    csv.out() << csv_field(a) << ',';
  for (size_t i = 0; i < std::size(figures); ++i)
    csv.out() << (i ? "," : "") << figures[i];
  csv.out() << '\n';
  json rows = json::array();
  for (const auto& c : r.rows) {
    json row = json::object();
    for (const auto& [axis, label] : c.grid)
      row[axis] = label;
    row.update({{"outcome", c.outcome}, {"sustained_rate_x", c.sustained_rate},
                {"time_scale", c.sustained_rate > 0 ? json(c.time_scale) : json()},
                {"requests_per_s", c.requests_per_s}, {"ttft_p99_ms", c.ttft_p99_ms},
                {"tpot_p99_ms", c.tpot_p99_ms}, {"iterations", c.iterations},
                {"failing_rate_x", c.failing_rate > 0 ? json(c.failing_rate) : json()},
                {"device_bytes", c.device_bytes}, {"host_bytes", c.host_bytes},
                {"storage_bytes", c.storage_bytes}, {"cell", c.cell},
                {"search_axis", c.searched_key},
                {"session_copies", c.sustained_rate > 0 ? json(c.session_copies) : json()}});
    for (const auto& a : axes)
      csv.out() << csv_text(row[a]) << ',';
    for (size_t i = 0; i < std::size(figures); ++i)
      csv.out() << (i ? "," : "") << csv_text(row[figures[i]]);
    csv.out() << '\n';
    rows.push_back(std::move(row));
  }
  csv.commit();
  atomic_file js(dir + "/slo.json");
  js.out() << json({{"slo", {{"ttft_p99_ms", r.limits.ttft_p99_ms},
                             {"tpot_p99_ms", r.limits.tpot_p99_ms},
                             {"precision", r.limits.precision}}},
                    {"axes", axes}, {"replays", r.replays}, {"rows", rows}}).dump(2)
           << '\n';
  js.commit();
}

}  // namespace

slo_study_result run_slo_study(const std::string& dir, const sweep_spec& spec,
                               const local_run_options& run) {
  if (spec.mode != "full")
    throw config_error("the SLO study needs latencies: mode full, not " + spec.mode);
  make_directories(dir);
  folder_lock lock(dir + "/.lock", "study folder " + dir);
  sweep_plan plan;
  std::vector<search_state> searches;
  for (sweep_cell& c : expand(spec)) {
    if (searches.empty())
      for (const auto& [axis, label] : c.grid)
        plan.axes.push_back(axis);
    resolve(config_of(c));  // a configuration that cannot run is refused before any replay
    const axis_search& axis = spec.search.of(c.trace_set);
    searches.push_back({c, axis, search_from(axis, 1.0), {}});
  }
  plan.axes.push_back("rate_x");
  slo_study_result result;
  config first = config_of(searches.front().base);
  result.limits = {first.number(keys::slo::ttft_p99_ms), first.number(keys::slo::tpot_p99_ms),
                   first.number(keys::slo::precision)};
  for (auto& st : searches)
    st.search = search_from(st.axis, result.limits.precision);
  std::map<std::string, bool> planned;
  for (size_t round = 1;; ++round) {
    sweep_plan this_round{plan.axes, {}, plan.build};
    for (auto& st : searches) {
      if (st.search.done())
        continue;
      sweep_cell c = cell_at(st, st.search.next());
      st.cells[st.search.next()] = c.id;
      if (!planned[c.id]) {
        planned[c.id] = true;
        plan.cells.push_back(c);
        this_round.cells.push_back(c);
      }
    }
    if (this_round.cells.empty())
      break;
    write_plan(dir, plan);
    if (run.progress)
      std::cerr << "slo: round " << round << ": " << this_round.cells.size()
                << " configurations at their next rate\n";
    run_local(dir, this_round, run);
    for (auto& st : searches) {
      if (st.search.done())
        continue;
      auto s = summary_of(dir, st.cells[st.search.next()]);
      result.failed_replays += !s;
      st.search.record(met(s, result.limits));
    }
  }
  result.replays = plan.cells.size();
  for (const auto& st : searches)
    result.rows.push_back(capacity_of(dir, st));
  collect(dir, plan);
  write_slo_outputs(dir, plan, result);
  return result;
}

}  // namespace kvtier
