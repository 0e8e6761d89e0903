// kvtier sweep, report and study as users run them: the grid, cell identity, resume, a failing
// cell, the results' schema, plan/cell/collect through the launchers docs/sweep.md names (a
// Slurm-style job array loop and GNU parallel) against a local sweep, and the report's files.

#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "tests/e2e/cli_support.hpp"
#include "tests/e2e/csv_support.hpp"

namespace {

using namespace cli_test;

outcome shell(const std::string& cmd) { return shell_run(cmd); }

const std::string& bin = binary;
const std::string sample = std::string(KVTIER_SOURCE_DIR) + "/traces/mooncake_conversation_sample.jsonl";

fs::path sweep_scratch(const std::string& name) { return scratch("sweep-" + name); }

const std::string small_grid =
  " --mode hitrate --trace " + sample +
  " --grid cache.write_policy=write_through,write_back --grid cache.host_tokens=100000,400000"
  " --seeds 1,2 --deterministic --quiet";

}  // namespace

TEST_CASE("sweep: the grid expands in order and cells are named by what decides them",
          "[sweep]") {
  fs::path a = sweep_scratch("plan-a"), b = sweep_scratch("plan-b"), c = sweep_scratch("plan-c");
  REQUIRE(kvtier("sweep --plan --out " + a.string() + small_grid).code == 0);
  json plan = json::parse(slurp(a / "plan.json"));
  REQUIRE(plan["cells"].size() == 8);  // 2 policies x 2 host sizes x 2 seeds
  CHECK(plan["axes"] == json({"cache.write_policy", "cache.host_tokens"}));
  // Seeds innermost, then the last axis.
  const json& cells = plan["cells"];
  CHECK(cells[0]["grid"] == json::array({json::array({"cache.write_policy", "write_through"}),
                                         json::array({"cache.host_tokens", "100000"})}));
  CHECK(cells[0]["seed"] == 1);
  CHECK(cells[1]["seed"] == 2);
  CHECK(cells[2]["grid"][1][1] == "400000");
  CHECK(cells[4]["grid"][0][1] == "write_back");
  CHECK(cells[7]["config"]["cache"]["host_tokens"] == 400000);
  std::set<std::string> ids;
  for (const auto& cell : cells)
    ids.insert(cell["id"].get<std::string>());
  CHECK(ids.size() == 8);
  CHECK(slurp(a / "cells.txt").size() == 8 * 17);
  // The same sweep planned again names the same cells; a changed key renames every cell.
  REQUIRE(kvtier("sweep --plan --out " + b.string() + small_grid).code == 0);
  CHECK(slurp(a / "cells.txt") == slurp(b / "cells.txt"));
  REQUIRE(kvtier("sweep --plan --out " + c.string() + small_grid + " --set cache.block_size=32").code == 0);
  json other = json::parse(slurp(c / "plan.json"));
  for (const auto& cell : other["cells"])
    CHECK(ids.count(cell["id"].get<std::string>()) == 0);
  // Bad grids are bad input, named.
  auto bad = kvtier("sweep --plan --out " + c.string() + " --grid cache.write_policy=write_sideways");
  CHECK(bad.code == 2);
  CHECK(bad.out.find("cache.write_policy") != std::string::npos);
  CHECK(kvtier("sweep --plan --out " + c.string() + " --grid cache.nonsense=1").code == 2);
  CHECK(kvtier("sweep --plan --out " + c.string() + " --seeds 1,x").code == 2);
  CHECK(kvtier("sweep --plan --out " + c.string() + " --trace /no/such.jsonl").code == 2);
  for (const auto& d : {a, b, c})
    fs::remove_all(d);
}

TEST_CASE("sweep: results.csv has one row per cell, the grid and every summary metric",
          "[sweep]") {
  fs::path out = sweep_scratch("local");
  auto r = kvtier("sweep --jobs 2 --out " + out.string() + small_grid);
  INFO(r.out);
  REQUIRE(r.code == 0);
  auto csv = read_csv(out / "results.csv");
  REQUIRE(csv.size() == 9);
  const std::vector<std::string> lead = {"cell", "status", "cache.write_policy",
                                         "cache.host_tokens", "seed", "error"};
  REQUIRE(csv[0].size() > lead.size());
  CHECK(std::vector<std::string>(csv[0].begin(), csv[0].begin() + 6) == lead);
  json plan = json::parse(slurp(out / "plan.json"));
  for (size_t i = 1; i < csv.size(); ++i) {
    REQUIRE(csv[i].size() == csv[0].size());
    auto row = row_map(csv, i);
    const json& cell = plan["cells"][i - 1];
    CHECK(row["cell"] == cell["id"]);
    CHECK(row["status"] == "ok");
    CHECK(row["cache.write_policy"] == cell["grid"][0][1]);
    // Every figure of the cell's own summary, flattened.
    json s = json::parse(slurp(out / "cells" / row["cell"] / "summary.json"));
    CHECK(row["hit_ratio.tokens"] == s["hit_ratio"]["tokens"].dump());
    CHECK(row["transfers.write_backs"] == s["transfers"]["write_backs"].dump());
    CHECK(row["trace.requests"] == "500");
  }
  // write_back makes write-backs (its backups are only the copies staged for storage at request
  // finish, docs/design.md "Storage writes"); write_through backups and no write-backs.
  auto wt = row_map(csv, 1), wb = row_map(csv, 5);
  CHECK(wt["transfers.write_backs"] == "0");
  CHECK(wt["transfers.backups"] != "0");
  CHECK(wb["transfers.write_backs"] != "0");
  json results = json::parse(slurp(out / "results.json"));
  CHECK(results["rows"].size() == 8);
  CHECK(results["rows"][0]["hit_ratio.tokens"].is_number());
  // The config stays in results.json; numeric grid values are numbers there.
  CHECK(results["rows"][0]["config.cache.host_tokens"] == 100000);
  CHECK(results["rows"][0]["cache.host_tokens"] == 100000);
  fs::remove_all(out);
}

TEST_CASE("sweep: a failing cell is reported and the others finish", "[sweep]") {
  fs::path out = sweep_scratch("fail");
  // cache.device_tokens=0 is a valid value but no device tier: that cell's replay refuses it.
  auto r = kvtier("sweep --jobs 2 --mode hitrate --trace " + sample + " --out " + out.string() +
                  " --grid cache.device_tokens=0,200000,400000");
  INFO(r.out);
  CHECK(r.code == 1);
  CHECK(r.out.find("failed: bad config: cache.device_tokens") != std::string::npos);
  auto csv = read_csv(out / "results.csv");
  REQUIRE(csv.size() == 4);
  auto bad = row_map(csv, 1);
  CHECK(bad["status"] == "failed");
  CHECK(bad["error"].find("device tier needs at least one block") != std::string::npos);
  CHECK(row_map(csv, 2)["status"] == "ok");
  CHECK(row_map(csv, 3)["status"] == "ok");
  CHECK(!row_map(csv, 3)["hit_ratio.tokens"].empty());
  fs::remove_all(out);
}

TEST_CASE("sweep: a killed sweep resumes where it stopped", "[sweep][resume]") {
  fs::path out = sweep_scratch("resume");
  // Full-mode cells of the sample, one at a time; the whole process group is killed (SIGKILL)
  // once the first cell is done, as a lost node or a Ctrl-C would leave it.
  std::string args = "sweep --jobs 1 --quiet --deterministic --trace " + sample + " --out " +
                     out.string() + " --grid cache.host_tokens=200000,400000,800000,1600000";
  // bash for its kill builtin, which signals a process group.
  auto killed = shell("bash -c '" "setsid " + bin + " " + args + " & pid=$!; "
                      "for i in $(seq 1 600); do "
                      "  n=$(ls " + out.string() + "/cells/*/cell.json 2>/dev/null | wc -l); "
                      "  [ \"$n\" -ge 1 ] && break; sleep 0.05; done; "
                      "kill -KILL -- -$pid; wait $pid; echo killed'");
  REQUIRE(killed.out.find("killed") != std::string::npos);
  size_t done_before = 0;
  std::map<std::string, fs::file_time_type> stamps;
  for (const auto& e : fs::directory_iterator(out / "cells"))
    if (fs::exists(e.path() / "cell.json")) {
      ++done_before;
      stamps[e.path().filename()] = fs::last_write_time(e.path() / "summary.json");
    }
  REQUIRE(done_before >= 1);
  REQUIRE(done_before < 4);
  auto r = kvtier(args.substr(0, args.find(" --quiet")) + args.substr(args.find(" --quiet") + 8));
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(r.out.find(std::to_string(done_before) + " of 4 cells already done") != std::string::npos);
  for (const auto& [id, stamp] : stamps)
    CHECK(fs::last_write_time(out / "cells" / id / "summary.json") == stamp);  // not run again
  auto csv = read_csv(out / "results.csv");
  REQUIRE(csv.size() == 5);
  for (size_t i = 1; i < 5; ++i)
    CHECK(row_map(csv, i)["status"] == "ok");
  fs::remove_all(out);
}

TEST_CASE("sweep: plan, cells by job array or GNU parallel, collect: the local sweep's results",
          "[sweep][plan]") {
  fs::path local = sweep_scratch("p-local"), array = sweep_scratch("p-array"), par = sweep_scratch("p-parallel");
  REQUIRE(kvtier("sweep --jobs 2 --out " + local.string() + small_grid).code == 0);
  // A Slurm job array's tasks, run one after another with the command docs/sweep.md gives.
  REQUIRE(kvtier("sweep --plan --out " + array.string() + small_grid).code == 0);
  auto a = shell("n=$(wc -l < " + array.string() + "/cells.txt); for SLURM_ARRAY_TASK_ID in "
                 "$(seq 1 $n); do " + bin + " sweep --out " + array.string() + " --quiet --cell "
                 "\"$(sed -n ${SLURM_ARRAY_TASK_ID}p " + array.string() + "/cells.txt)\" || exit 1; done");
  INFO(a.out);
  REQUIRE(a.code == 0);
  REQUIRE(kvtier("sweep --collect --out " + array.string()).code == 0);
  CHECK(slurp(array / "results.csv") == slurp(local / "results.csv"));
  // GNU parallel.
  REQUIRE(kvtier("sweep --plan --out " + par.string() + small_grid).code == 0);
  auto p = shell("parallel --will-cite --jobs 2 " + bin + " sweep --out " + par.string() +
                 " --quiet --cell {} :::: " + par.string() + "/cells.txt");
  INFO(p.out);
  REQUIRE(p.code == 0);
  REQUIRE(kvtier("sweep --collect --out " + par.string()).code == 0);
  CHECK(slurp(par / "results.csv") == slurp(local / "results.csv"));
  // Collecting a plan whose cells did not run says so.
  fs::path empty = sweep_scratch("p-empty");
  REQUIRE(kvtier("sweep --plan --out " + empty.string() + small_grid).code == 0);
  auto c = kvtier("sweep --collect --out " + empty.string());
  CHECK(c.code == 1);
  CHECK(c.out.find("8 not run") != std::string::npos);
  CHECK(kvtier("sweep --out " + empty.string() + " --cell 0123456789abcdef").code == 2);
  for (const auto& d : {local, array, par, empty})
    fs::remove_all(d);
}

namespace {

// PNG signature, IHDR first, and a non-empty image.
bool valid_png(const fs::path& p) {
  std::string b = slurp(p);
  if (b.size() < 33 || b.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0 || b.compare(12, 4, "IHDR") != 0)
    return false;
  auto be32 = [&](size_t at) {
    return (uint32_t(uint8_t(b[at])) << 24) | (uint32_t(uint8_t(b[at + 1])) << 16) |
           (uint32_t(uint8_t(b[at + 2])) << 8) | uint32_t(uint8_t(b[at + 3]));
  };
  return be32(16) > 0 && be32(20) > 0 && b.compare(b.size() - 8, 4, "IEND") == 0;
}

}  // namespace

TEST_CASE("report: tables hold results.csv's numbers and plots are valid images", "[sweep][report]") {
  fs::path out = sweep_scratch("report");
  auto r = kvtier("sweep --jobs 2 --quiet --trace " + sample + " --out " + out.string() +
                  " --grid cache.write_policy=write_through,write_back"
                  " --grid cache.host_tokens=200000,800000");
  INFO(r.out);
  REQUIRE(r.code == 0);
  auto rep = kvtier("report " + out.string());
  INFO(rep.out);
  REQUIRE(rep.code == 0);
  for (const char* name : {"hit_ratio_vs_capacity", "ttft_p99", "tpot_p99", "ttft_cdf"}) {
    INFO(name);
    CHECK(valid_png(out / "plots" / (std::string(name) + ".png")));
    CHECK(slurp(out / "plots" / (std::string(name) + ".svg")).find("<svg") != std::string::npos);
  }
  std::string md = slurp(out / "report.md");
  auto csv = read_csv(out / "results.csv");
  REQUIRE(csv.size() == 5);
  for (size_t i = 1; i < csv.size(); ++i) {
    auto row = row_map(csv, i);
    // The table row of this cell: its grid values, then the hit ratio and TTFT p50 as printed.
    char hit[32], ttft[32];
    std::snprintf(hit, sizeof hit, "%.4f", std::stod(row["hit_ratio.tokens"]));
    std::snprintf(ttft, sizeof ttft, "%.1f", std::stod(row["latency_ms.ttft.p50"]));
    // Its rows in the hit-ratio table, then the latency table.
    std::string head = "| " + row["cache.write_policy"] + " | " + row["cache.host_tokens"] + " | ";
    auto at = md.find(head);
    REQUIRE(at != std::string::npos);
    std::string line = md.substr(at, md.find('\n', at) - at);
    INFO(line);
    CHECK(line.find(std::string(hit)) != std::string::npos);
    at = md.find(head, at + 1);
    REQUIRE(at != std::string::npos);
    line = md.substr(at, md.find('\n', at) - at);
    INFO(line);
    CHECK(line.find(std::string(ttft)) != std::string::npos);
  }
  CHECK(md.find("**") != std::string::npos);  // the best cell of a metric is marked
  CHECK(md.find("![") != std::string::npos);
  CHECK(kvtier("report " + (out / "nothing").string()).code == 2);
  fs::remove_all(out);
}

TEST_CASE("study: named sweeps, and a study whose feature is missing says what it needs",
          "[sweep][study]") {
  auto list = kvtier("study --list");
  CHECK(list.code == 0);
  // Every study kvtier ships runs: none is listed as needing a feature.
  for (const char* name : {"write-policy", "capacity", "preemption", "pd-handoff", "pd-fig10",
                           "slo"})
    CHECK(list.out.find(std::string("  ") + name + ": ") != std::string::npos);
  CHECK(list.out.find("needs") == std::string::npos);
  CHECK(list.out.find("not built yet") == std::string::npos);
  fs::path needs = sweep_scratch("needs.json");
  std::ofstream(needs) << R"({"description": "d", "needs": "a feature kvtier lacks"})";
  auto pre = kvtier("sweep --file " + needs.string());
  CHECK(pre.code == 2);
  CHECK(pre.out.find("needs \"a feature kvtier lacks\"") != std::string::npos);
  fs::remove(needs);
  CHECK(kvtier("study no-such-study").code == 2);
  // The preemption study: 3 preemption modes x 2 write policies.
  fs::path pre_dir = sweep_scratch("study-preemption");
  auto pre_plan = kvtier("study preemption --plan --quiet --out " + pre_dir.string());
  INFO(pre_plan.out);
  REQUIRE(pre_plan.code == 0);
  CHECK(json::parse(slurp(pre_dir / "plan.json"))["cells"].size() == 6);
  fs::remove_all(pre_dir);
  // The SLO study searches round by round: it cannot be planned ahead.
  auto slo_plan = kvtier("study slo --plan --out " + sweep_scratch("study-slo").string());
  CHECK(slo_plan.code == 2);
  CHECK(slo_plan.out.find("cannot be planned ahead") != std::string::npos);
  // The write-policy study plans 6 policies x 3 storage modes x 3 host sizes on 2 trace sets,
  // each configuration 3 times: seeds 1-3, each a workload variant.
  fs::path out = sweep_scratch("study");
  auto plan = kvtier("study write-policy --plan --quiet --out " + out.string());
  INFO(plan.out);
  REQUIRE(plan.code == 0);
  json cells = json::parse(slurp(out / "plan.json"))["cells"];
  CHECK(cells.size() == 324);
  std::set<uint64_t> seeds;
  for (const auto& c : cells) {
    seeds.insert(c["seed"].get<uint64_t>());
    CHECK(c["config"]["trace"]["sample_fraction"].get<double>() < 1);
  }
  CHECK(seeds == std::set<uint64_t>{1, 2, 3});
  fs::remove_all(out);
  // The PD study: 2 deployments x 2 handoff modes, and 4 mixed instances, at 2 time scales.
  fs::path pd = sweep_scratch("study-pd");
  auto pd_plan = kvtier("study pd-handoff --plan --quiet --out " + pd.string());
  INFO(pd_plan.out);
  REQUIRE(pd_plan.code == 0);
  CHECK(json::parse(slurp(pd / "plan.json"))["cells"].size() == 10);
  fs::remove_all(pd);
}

namespace {

// Each seed's row of a sweep over seeds 1..3, without the columns that name the cell.
std::vector<std::map<std::string, std::string>> replicate_rows(const fs::path& out) {
  auto csv = read_csv(out / "results.csv");
  std::vector<std::map<std::string, std::string>> rows;
  for (size_t i = 1; i < csv.size(); ++i) {
    auto row = row_map(csv, i);
    for (const char* c : {"cell", "seed", "config.trace.sample_fraction"})
      row.erase(c);
    rows.push_back(row);
  }
  return rows;
}

}  // namespace

TEST_CASE("sweep: seeds draw workload variants, and without one they are warned to change nothing",
          "[sweep][replicates]") {
  fs::path out = sweep_scratch("replicates");
  const std::string base = "sweep --jobs 2 --mode hitrate --trace " + sample +
                           " --seeds 1,2,3 --deterministic --quiet --out ";
  SECTION("no variant, no fault: identical rows and a warning") {
    auto r = kvtier(base + out.string());
    INFO(r.out);
    REQUIRE(r.code == 0);
    CHECK(r.out.find("change nothing") != std::string::npos);
    auto rows = replicate_rows(out);
    REQUIRE(rows.size() == 3);
    CHECK(rows[0] == rows[1]);
    CHECK(rows[1] == rows[2]);
  }
  SECTION("sub-sampled sessions and jittered arrivals: a row per seed, no warning") {
    auto r = kvtier(base + out.string() +
                    " --set trace.sample_fraction=0.7 --set trace.arrival_jitter_s=30");
    INFO(r.out);
    REQUIRE(r.code == 0);
    CHECK(r.out.find("change nothing") == std::string::npos);
    auto rows = replicate_rows(out);
    REQUIRE(rows.size() == 3);
    std::set<std::string> requests;
    for (auto& row : rows) {
      requests.insert(row["trace.requests"]);
      CHECK(std::stoi(row["trace.requests"]) > 250);  // about 70% of the sample's 500
      CHECK(std::stoi(row["trace.requests"]) < 450);
    }
    CHECK(requests.size() == 3);
    // The same seed draws the same variant: a second sweep into a fresh folder agrees.
    fs::path again = sweep_scratch("replicates-again");
    auto r2 = kvtier(base + again.string() +
                     " --set trace.sample_fraction=0.7 --set trace.arrival_jitter_s=30");
    REQUIRE(r2.code == 0);
    CHECK(slurp(again / "results.csv") == slurp(out / "results.csv"));
    fs::remove_all(again);
  }
  fs::remove_all(out);
}

TEST_CASE("sweep: one sweep per folder, killed workers' rows say how, workers die with the sweep",
          "[sweep][lock]") {
  // Full-mode cells of the whole conversation trace: seconds each, long enough to act on.
  const std::string trace = std::string(KVTIER_SHARED_DIR) +
                            "/traces/mooncake/conversation_trace.jsonl";
  REQUIRE(fs::exists(trace));
  fs::path out = sweep_scratch("lock");
  std::string args = "sweep --jobs 1 --quiet --deterministic --trace " + trace +
                     " --set trace.time_scale=8 --grid cache.host_tokens=1000000,2000000,3000000";
  // Start a sweep, wait for its first worker, kill that worker, then try a second sweep on the
  // same folder while the first goes on; finally kill a sweep and see whether its worker lives.
  auto r = shell("bash -c '"
                 "setsid " + bin + " " + args + " --out " + out.string() + " & pid=$!; "
                 "for i in $(seq 1 200); do w=$(pgrep -P $pid); [ -n \"$w\" ] && break; "
                 "  sleep 0.05; done; "
                 "kill -KILL $w; sleep 0.2; "
                 + bin + " " + args + " --out " + out.string() + "; echo second=$?; "
                 "wait $pid; echo first=$?; "
                 "setsid " + bin + " " + args + " --out " + out.string() + "-2 & pid=$!; "
                 "for i in $(seq 1 200); do w=$(pgrep -P $pid); [ -n \"$w\" ] && break; "
                 "  sleep 0.05; done; "
                 "kill -KILL $pid; sleep 0.5; "
                 "state=$(ps -o stat= -p $w | cut -c1); "
                 "[ -z \"$state\" ] || [ \"$state\" = Z ] && echo worker-died || "
                 "  { echo worker-alive; kill -KILL $w; }'");
  INFO(r.out);
  CHECK(r.out.find("second=2") != std::string::npos);
  CHECK(r.out.find("is in use by another kvtier process") != std::string::npos);
  CHECK(r.out.find("first=1") != std::string::npos);
  CHECK(r.out.find("worker-died") != std::string::npos);
  auto csv = read_csv(out / "results.csv");
  REQUIRE(csv.size() == 4);
  auto killed = row_map(csv, 1);
  CHECK(killed["status"] == "failed");
  CHECK(killed["error"] == "the worker ended without a result: killed by SIGKILL");
  CHECK(row_map(csv, 2)["status"] == "ok");
  fs::remove_all(out);
  fs::remove_all(out.string() + "-2");
}

namespace {

// A summary without what names the build that made it (the same numbers either way).
json numbers_of(const fs::path& summary) {
  json s = json::parse(slurp(summary));
  s.erase("kvtier");
  return s;
}

// The one cell of a one-cell sweep in `dir`: its folder.
fs::path only_cell(const fs::path& dir) {
  std::string id = slurp(dir / "cells.txt");
  id = id.substr(0, id.find('\n'));
  return dir / "cells" / id;
}

}  // namespace

TEST_CASE("sweep: replay and sweep give the same numbers for the same config",
          "[sweep][scenario]") {
  // The sample scenario (configs/sample.json) with no trace named, in both: the same replay.
  fs::path r = sweep_scratch("same-r"), w = sweep_scratch("same-w");
  auto rr = kvtier("replay --deterministic --quiet --out " + r.string());
  REQUIRE(rr.code == 0);
  auto sw = kvtier("sweep --deterministic --quiet --jobs 1 --out " + w.string());
  INFO(sw.out);
  REQUIRE(sw.code == 0);
  CHECK(numbers_of(r / "summary.json") == numbers_of(only_cell(w) / "summary.json"));
  CHECK(numbers_of(r / "summary.json")["config"]["trace"]["time_scale"] == 8);
  // A named trace under a named config, with a workload variant drawn by seed 2: the same.
  std::string config = " --config " + std::string(KVTIER_SOURCE_DIR) + "/configs/sample.json"
                       " --set trace.sample_fraction=0.8 --set trace.arrival_jitter_s=3";
  fs::remove_all(r);
  fs::remove_all(w);
  rr = kvtier("replay --deterministic --quiet --seed 2 --trace " + sample + config + " --out " +
              r.string());
  REQUIRE(rr.code == 0);
  sw = kvtier("sweep --deterministic --quiet --jobs 1 --seeds 2 --trace " + sample + config +
              " --out " + w.string());
  REQUIRE(sw.code == 0);
  CHECK(numbers_of(r / "summary.json") == numbers_of(only_cell(w) / "summary.json"));
  CHECK(slurp(r / "requests.csv") == slurp(only_cell(w) / "requests.csv"));
  fs::remove_all(r);
  fs::remove_all(w);
}

TEST_CASE("sweep: a cell past --cell-time-limit is killed and its row says so",
          "[sweep][limits]") {
  // 16 copies of the sample's sessions in full mode take seconds; the limit is a fraction of one.
  fs::path dir = sweep_scratch("time-limit");
  auto r = kvtier("sweep --quiet --jobs 1 --cell-time-limit 0.3 --trace " + sample +
                  " --set trace.session_copies=16 --out " + dir.string());
  INFO(r.out);
  CHECK(r.code == 1);
  std::string results = slurp(dir / "results.csv");
  CHECK(results.find("killed after the per-cell time limit of 0.3 s (--cell-time-limit)")
        != std::string::npos);
  CHECK(kvtier("sweep --quiet --cell-time-limit 0 --out " + dir.string()).code == 2);
  fs::remove_all(dir);
}
