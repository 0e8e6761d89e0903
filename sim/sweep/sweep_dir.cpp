#include "sim/sweep/sweep_dir.hpp"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include <unistd.h>

#include "runtime/config/options.hpp"
#include "sim/driver/replay_driver.hpp"
#include "sim/report/atomic_file.hpp"
#include "sim/report/provenance.hpp"
#include "sim/sweep/flatten.hpp"
#include "sim/sweep/folder_lock.hpp"
#include "sim/sweep/results_tables.hpp"
#include "sim/trace/trace_reader.hpp"

namespace kvtier {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::optional<json> read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return std::nullopt;
  json j = json::parse(in, nullptr, false);
  if (j.is_discarded())
    return std::nullopt;
  return j;
}

void write_json(const std::string& path, const json& j) {
  atomic_file f(path);
  f.out() << j.dump(2) << '\n';
  f.commit();
}

// The machine a cell ran on: wall_s means little without it, and a study page names it
// (docs/outputs.md, "kvtier sweep").
json host_of_this_process() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0)
    name[0] = '\0';
  return {{"name", name}, {"cores", std::thread::hardware_concurrency()}};
}

void write_cell_status(const std::string& dir, const sweep_cell& cell, const std::string& status,
                       int code, const std::string& error, double wall_s,
                       bool provisional = false) {
  json j = {{"id", cell.id}, {"status", status}, {"exit_code", code}, {"wall_s", wall_s},
            {"kvtier", build_id()}, {"host", host_of_this_process()}};
  if (!error.empty())
    j["error"] = error;
  if (provisional)
    j["provisional"] = true;
  make_directories(cell_dir(dir, cell.id));  // a cell that never started has no folder yet
  write_json(cell_dir(dir, cell.id) + "/cell.json", j);
}

// A plan written before plans named their build reads as "unknown": never this build.
std::string plan_build(const json& plan) {
  if (!plan.contains("kvtier"))
    return "unknown";
  const json& k = plan.at("kvtier");
  return k.value("version", "unknown") + "+" + k.value("commit", "unknown");
}

}  // namespace

sweep_plan make_plan(const sweep_spec& spec) {
  sweep_plan plan;
  plan.cells = expand(spec);
  if (!plan.cells.empty())
    for (const auto& [name, label] : plan.cells.front().grid)
      plan.axes.push_back(name);
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < plan.cells.size(); ++i) {
    auto [it, fresh] = seen.emplace(plan.cells[i].id, i);
    if (!fresh)
      throw config_error("cells " + std::to_string(it->second + 1) + " and "
                         + std::to_string(i + 1) + " are the same replay (a grid value that "
                         "changes nothing, or a repeated value): the sweep would run it twice");
  }
  return plan;
}

void write_plan(const std::string& dir, const sweep_plan& plan) {
  make_directories(dir + "/cells");
  json cells = json::array();
  for (const auto& c : plan.cells)
    cells.push_back(to_json(c));
  write_json(dir + "/plan.json", {{"kvtier_sweep_plan", 1}, {"kvtier", build_info_json()},
                                  {"axes", plan.axes}, {"cells", cells}});
  atomic_file ids(dir + "/cells.txt");
  for (const auto& c : plan.cells)
    ids.out() << c.id << '\n';
  ids.commit();
}

sweep_plan read_plan(const std::string& dir) {
  std::string path = dir + "/plan.json";
  auto j = read_json(path);
  if (!j || !j->contains("kvtier_sweep_plan"))
    throw config_error(path + ": no sweep plan here (make one with kvtier sweep ... --plan)");
  sweep_plan plan;
  try {
    plan.build = plan_build(*j);
    plan.axes = j->at("axes").get<std::vector<std::string>>();
    for (const auto& c : j->at("cells"))
      plan.cells.push_back(cell_from_json(c));
  } catch (const json::exception& e) {
    throw config_error(path + ": " + e.what());
  }
  return plan;
}

std::optional<std::string> plan_of_other_build(const std::string& dir) {
  auto j = read_json(dir + "/plan.json");
  if (!j || !j->contains("kvtier_sweep_plan") || plan_build(*j) == build_id())
    return std::nullopt;
  return dir + "/plan.json was made by kvtier " + plan_build(*j) + ", this is kvtier "
         + build_id() + ": every cell runs again under new ids (the old ones stay in " + dir
         + "/cells/, out of results.csv)";
}

std::string cell_dir(const std::string& dir, const std::string& id) {
  return dir + "/cells/" + id;
}

std::optional<json> cell_status(const std::string& dir, const std::string& id) {
  return read_json(cell_dir(dir, id) + "/cell.json");
}

bool cell_done(const std::string& dir, const std::string& id) {
  auto s = cell_status(dir, id);
  // A cell another build ran is not done for this one (docs/outputs.md, "Provenance").
  return s && s->value("status", "") == "ok" && s->value("id", "") == id
         && s->value("kvtier", "") == build_id() && fs::exists(cell_dir(dir, id) + "/summary.json");
}

int run_cell(const std::string& dir, const sweep_plan& plan, const std::string& id) {
  const sweep_cell* cell = nullptr;
  for (const auto& c : plan.cells)
    if (c.id == id)
      cell = &c;
  if (!cell)
    throw config_error("cell " + id + ": not in " + dir + "/plan.json (see its cells.txt)");
  if (plan.build != build_id())
    throw config_error(dir + "/plan.json was made by kvtier " + plan.build + ", this is kvtier "
                       + build_id() + ": one sweep never mixes builds; plan it again with this "
                       "binary (kvtier sweep ... --plan) or run the plan's binary");
  std::string out = cell_dir(dir, id);
  make_directories(out);
  folder_lock running(out + "/.lock", "cell " + id);
  fs::remove(out + "/cell.json");  // from here on the cell is not done until it says so
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::string error;
  int code = 0;
  try {
    replay_job job;
    job.cfg.merge_json(cell->config, dir + "/plan.json cell " + id);
    job.traces = cell->traces;
    job.format = cell->format;
    job.mode = cell->mode == "hitrate" ? replay_mode::hitrate : replay_mode::full;
    job.deterministic = cell->deterministic;
    job.seed = cell->seed;  // draws the cell's faults, if it configures any
    job.out_dir = out;
    replay_result r = run_replay_job(job);
    if (r.invariant_violations > 0) {
      error = std::to_string(r.invariant_violations) + " invariant violations; first: "
              + r.first_violation;
      code = 1;
    } else if (!r.drained) {
      error = "the replay stopped with requests unfinished";
      code = 1;
    }
  } catch (const config_error& e) {
    error = std::string("bad config: ") + e.what();
    code = 2;
  } catch (const trace_error& e) {
    error = std::string("bad trace: ") + e.what();
    code = 2;
  } catch (const std::exception& e) {
    error = e.what();
    code = 1;
  }
  write_cell_status(dir, *cell, code == 0 ? "ok" : "failed", code, error,
                    cell->deterministic ? 0.0 : elapsed());
  return code;
}

void record_worker_end(const std::string& dir, const std::string& id, const std::string& how) {
  record_cell_failure(dir, id, "the worker ended without a result: " + how);
}

void record_cell_failure(const std::string& dir, const std::string& id, const std::string& error,
                         bool provisional) {
  sweep_cell cell;
  cell.id = id;
  write_cell_status(dir, cell, "failed", -1, error, 0.0, provisional);
}

void clear_cell_status(const std::string& dir, const std::string& id) {
  std::error_code ec;
  fs::remove(cell_dir(dir, id) + "/cell.json", ec);
  fs::remove(cell_dir(dir, id) + "/log.txt", ec);
}

collect_result collect(const std::string& dir, const sweep_plan& plan,
                       const std::map<std::string, std::string>& not_run) {
  collect_result result;
  std::vector<std::string> columns = {"cell", "status"};
  for (const auto& a : plan.axes)
    columns.push_back(a);
  columns.push_back("seed");
  columns.push_back("error");
  std::map<std::string, bool> known(  // columns already listed
    {{"cell", true}, {"status", true}, {"seed", true}, {"error", true}});
  for (const auto& a : plan.axes)
    known[a] = true;
  std::vector<result_row> rows;
  for (const auto& cell : plan.cells) {
    result_row row;
    row["cell"] = cell.id;
    for (const auto& [name, label] : cell.grid)
      row[name] = axis_value(label);
    row["seed"] = cell.seed;
    auto status = cell_status(dir, cell.id);
    std::string s = status ? status->value("status", "failed") : "missing";
    if (s == "ok" && !cell_done(dir, cell.id))
      s = "missing";
    row["status"] = s;
    if (status && status->contains("error"))
      row["error"] = (*status)["error"];
    else if (!status && not_run.count(cell.id))
      row["error"] = not_run.at(cell.id);
    auto summary = read_json(cell_dir(dir, cell.id) + "/summary.json");
    if (summary && s != "missing") {
      std::vector<std::pair<std::string, json>> flat;
      flatten_summary(*summary, "", flat);
      for (auto& [k, v] : flat) {
        if (dropped_column(k))
          continue;
        if (!known[k]) {
          known[k] = true;
          columns.push_back(k);
        }
        row[k] = v;
      }
    }
    (s == "ok" ? result.ok : s == "missing" ? result.missing : result.failed) += 1;
    if (s == "ok" && summary && summary->contains("load")) {
      const json& load = (*summary)["load"];
      if (load.value("overloaded", false)) {
        ++result.overloaded;
        ++result.overload_causes[load.value("cause", "arrivals")];
      }
      result.clock_lag += load.value("clock_lag", false) ? 1 : 0;
      result.l3_backpressure += load.value("l3_backpressure", false) ? 1 : 0;
    }
    rows.push_back(std::move(row));
  }
  write_results(dir, plan.axes, columns, rows);
  return result;
}

std::vector<std::string> load_warnings(const collect_result& c, const std::string& dir) {
  std::vector<std::string> out;
  std::string of = " of " + std::to_string(c.ok) + " finished cells ";
  if (c.overloaded > 0) {
    std::string causes;
    for (const auto& [cause, n] : c.overload_causes)
      causes += (causes.empty() ? "" : ", ") + std::to_string(n) + " "
                + (cause == "clock_lag"         ? "by clock lag"
                   : cause == "l3_backpressure" ? "by L3 backpressure"
                                                : "by arrivals outpacing the instance");
    out.push_back(std::to_string(c.overloaded) + of + "OVERLOADED (" + causes
                  + "): the queue grew through the run, so their latency measures queueing, not "
                    "caching; each cell's load.cause and load.advice say what to change");
  }
  if (c.clock_lag > 0)
    out.push_back(std::to_string(c.clock_lag) + of + "with CLOCK LAG: the machine did not keep "
                  "up with the wall clock (load.clock_lag_share)");
  if (c.l3_backpressure > 0)
    out.push_back(std::to_string(c.l3_backpressure) + of + "with L3 BACKPRESSURE: transfers "
                  "waited for room to storage (load.l3_wait_share)");
  if (!out.empty())
    out.push_back("kvtier report " + dir + " names them in report.md and marks them on the "
                  "figures");
  return out;
}

}  // namespace kvtier
