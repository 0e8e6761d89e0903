// The sweep's tidy tables and the report's figures as a reader of a paper needs them
// (docs/sweep.md "Reports", docs/outputs.md "kvtier sweep"): results.csv holds grid values and
// metrics only, results_long.csv every metric with its unit; each figure comes as PNG (200 dpi
// or more), SVG and PDF, and draws one line per configuration whose points are that
// configuration's own cells, never a mean over another grid axis.

#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <set>
#include <string>

#include "tests/e2e/cli_support.hpp"
#include "tests/e2e/csv_support.hpp"

namespace {

using namespace cli_test;

const std::string sample =
  std::string(KVTIER_SOURCE_DIR) + "/traces/mooncake_conversation_sample.jsonl";

// The PNG's resolution from its pHYs chunk (pixels per metre), in dots per inch; 0 without one.
double png_dpi(const fs::path& p) {
  std::string b = slurp(p);
  auto at = b.find("pHYs");
  if (b.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0 || at == std::string::npos || b.size() < at + 13)
    return 0;
  uint32_t ppm = 0;
  for (size_t i = 0; i < 4; ++i)
    ppm = (ppm << 8) | uint8_t(b[at + 4 + i]);
  return b[at + 12] == 1 ? ppm * 0.0254 : 0;
}

void check_figure_files(const fs::path& plots, const std::string& name) {
  INFO(name);
  CHECK(png_dpi(plots / (name + ".png")) >= 200);
  CHECK(slurp(plots / (name + ".svg")).find("<svg") != std::string::npos);
  CHECK(slurp(plots / (name + ".pdf")).rfind("%PDF", 0) == 0);
}

// Every line of a figure: its label and, per point, its value and cells.
size_t line_count(const json& figure) {
  size_t n = 0;
  for (const auto& panel : figure["panels"])
    n += panel["lines"].size();
  return n;
}

}  // namespace

TEST_CASE("sweep: results.csv has grid keys and metrics, results_long.csv their units",
          "[sweep][results]") {
  fs::path out = scratch("sweep-tidy");
  auto r = kvtier("sweep --jobs 2 --quiet --deterministic --mode hitrate --trace " + sample +
                  " --out " + out.string() + " --grid cache.host_tokens=1e5,4e5");
  INFO(r.out);
  REQUIRE(r.code == 0);
  auto wide = read_csv(out / "results.csv");
  REQUIRE(wide.size() == 3);
  size_t provenance = 0;
  for (const std::string& column : wide[0]) {
    INFO(column);
    CHECK(column.rfind("config.", 0) != 0);
    CHECK(column.rfind("trace.files.", 0) != 0);
    CHECK(column != "mode");  // text, not a metric
    provenance += column.rfind("kvtier.", 0) == 0;
  }
  CHECK(provenance == 5);  // the build, last (docs/outputs.md, "Provenance")
  CHECK(row_map(wide, 1)["cache.host_tokens"] == "100000");  // a number, not the label 1e5
  CHECK(row_map(wide, 2)["cache.host_tokens"] == "400000");
  auto results = json::parse(slurp(out / "results.json"));
  CHECK(results["rows"][0]["cache.host_tokens"] == 100000);
  CHECK(results["rows"][0].contains("config.cache.block_size"));
  auto long_rows = read_csv(out / "results_long.csv");
  REQUIRE(long_rows[0] == std::vector<std::string>({"cell", "metric", "value", "unit"}));
  // One line per metric column of each cell, with the wide table's value.
  size_t metrics = wide[0].size() - 5 - provenance;  // cell, status, the axis, seed, error
  REQUIRE(long_rows.size() == 1 + 2 * metrics);
  std::map<std::string, std::string> unit;
  for (size_t i = 1; i < long_rows.size(); ++i) {
    auto line = row_map(long_rows, i);
    auto cell = row_map(wide, i <= metrics ? 1 : 2);
    CHECK(line["cell"] == cell["cell"]);
    CHECK(line["value"] == cell[line["metric"]]);
    CHECK(!line["unit"].empty());
    unit[line["metric"]] = line["unit"];
  }
  CHECK(unit["hit_ratio.tokens"] == "fraction");
  CHECK(unit["hits.tokens.host"] == "tokens");
  CHECK(unit["transfers.backups"] == "blocks");
  CHECK(unit["wall_s"] == "s");
  CHECK(unit["trace.requests"] == "requests");
  // Collected again: the same bytes.
  std::string before = slurp(out / "results_long.csv");
  REQUIRE(kvtier("sweep --collect --out " + out.string()).code == 0);
  CHECK(slurp(out / "results_long.csv") == before);
  fs::remove_all(out);
}

TEST_CASE("report: figures in three formats, one line per configuration, none averaged",
          "[sweep][report]") {
  fs::path out = scratch("report-figures");
  auto r = kvtier("sweep --jobs 2 --quiet --deterministic --trace " + sample + " --out " +
                  out.string() + " --grid cache.write_policy=write_through,write_back"
                  " --grid cache.storage_write=always,never --grid cache.host_tokens=1e5,8e5");
  INFO(r.out);
  REQUIRE(r.code == 0);
  auto rep = kvtier("report " + out.string());
  INFO(rep.out);
  REQUIRE(rep.code == 0);
  fs::path plots = out / "plots";
  for (const char* name : {"hit_ratio_vs_capacity", "ttft_p99", "tpot_p99", "d2h_per_token",
                           "ttft_cdf"})
    check_figure_files(plots, name);
  auto results = json::parse(slurp(out / "results.json"));
  std::map<std::string, json> by_cell;
  for (const auto& row : results["rows"])
    by_cell[row["cell"].get<std::string>()] = row;
  auto figures = json::parse(slurp(plots / "figures.json"));
  // 2 policies x 2 storage modes: 4 configurations besides the x axis, so 4 lines, each point
  // one cell's own figure (a mean over storage modes would match neither cell).
  for (const char* name : {"hit_ratio_vs_capacity", "ttft_p99", "d2h_per_token"}) {
    INFO(name);
    const json& f = figures[name];
    CHECK(f["x"] == "cache.host_tokens");
    CHECK(f["panels"].size() == 2);  // a row of panels per storage mode
    CHECK(line_count(f) == 4);
    for (const auto& panel : f["panels"])
      for (const auto& line : panel["lines"]) {
        REQUIRE(line["y"].size() == 2);
        for (size_t k = 0; k < 2; ++k) {
          REQUIRE(line["cells"][k].size() == 1);
          const json& cell = by_cell[line["cells"][k][0].get<std::string>()];
          CHECK(cell["cache.host_tokens"].get<double>() == line["x"][k].get<double>());
          if (std::string(name) != "d2h_per_token")
            CHECK(line["y"][k].get<double>() == Approx(cell[f["metric"].get<std::string>()]
                                                         .get<double>()));
        }
      }
  }
  // The CDF draws a curve per cell at the largest host size: 4 cells, never pooled.
  CHECK(line_count(figures["ttft_cdf"]) == 4);
  std::set<std::string> cdf_cells;
  for (const auto& panel : figures["ttft_cdf"]["panels"])
    for (const auto& line : panel["lines"])
      cdf_cells.insert(line["cell"].get<std::string>());
  CHECK(cdf_cells.size() == 4);

  // Every figure asks its question in its title, and its PDF embeds TrueType (Type 42) fonts,
  // never Type 3 ones.
  for (const auto& [name, figure] : figures.items()) {
    INFO(name);
    CHECK(figure["question"].get<std::string>().back() == '?');
    std::string pdf = slurp(plots / (name + ".pdf"));
    CHECK(pdf.find("/CIDFontType2") != std::string::npos);  // TrueType outlines (Type 42)
    CHECK(pdf.find("/Type3") == std::string::npos);
  }

  // Options: a filter leaves one storage mode (one panel, 2 lines); the series and facet are
  // chosen; an unknown axis is bad input. A --metric report goes to --out as metric-COLUMN,
  // leaving the default report whole; a report written again over another removes the figures
  // the other drew.
  fs::path by = out / "by-metric";
  auto opt = kvtier("report " + out.string() + " --filter cache.storage_write=never"
                    " --metric latency_ms.ttft.p50 --logy --out " + by.string());
  INFO(opt.out);
  REQUIRE(opt.code == 0);
  figures = json::parse(slurp(by / "plots" / "figures.json"));
  const json& p50 = figures["metric-latency_ms_ttft_p50"];
  CHECK(p50["panels"].size() == 1);
  CHECK(line_count(p50) == 2);
  CHECK(p50["constants"]["cache.storage_write"] == "never");
  check_figure_files(by / "plots", "metric-latency_ms_ttft_p50");
  CHECK(fs::exists(plots / "ttft_p99.png"));  // the default report is untouched
  CHECK(slurp(out / "report.md").find("metric-") == std::string::npos);
  auto swapped = kvtier("report " + out.string() + " --series cache.storage_write"
                        " --facet cache.write_policy --metric hit_ratio.tokens");
  REQUIRE(swapped.code == 0);
  figures = json::parse(slurp(plots / "figures.json"));
  CHECK(figures.size() == 1);
  CHECK(figures["metric-hit_ratio_tokens"]["facet"] == "cache.write_policy");
  CHECK(figures["metric-hit_ratio_tokens"]["panels"].size() == 2);
  CHECK(line_count(figures["metric-hit_ratio_tokens"]) == 4);
  for (const char* stale : {"ttft_p99", "hit_ratio_vs_capacity", "ttft_cdf"})
    for (const char* ext : {".png", ".svg", ".pdf"})
      CHECK_FALSE(fs::exists(plots / (std::string(stale) + ext)));
  CHECK(kvtier("report " + out.string() + " --x no.such_axis").code == 2);
  CHECK(kvtier("report " + out.string() + " --filter cache.host_tokens=7").code == 2);
  fs::remove_all(out);
}

TEST_CASE("report: a replay's time series as a figure", "[report][timeseries]") {
  fs::path out = scratch("report-series");
  auto r = kvtier("replay --deterministic --trace " + sample + " --out " + out.string() +
                  " --set output.timeseries=true --set trace.time_scale=4");
  INFO(r.out);
  REQUIRE(r.code == 0);
  REQUIRE(fs::exists(out / "timeseries.csv"));
  auto rep = kvtier("report --timeseries " + out.string());
  INFO(rep.out);
  REQUIRE(rep.code == 0);
  check_figure_files(out / "plots", "timeseries");
  CHECK(kvtier("report --timeseries " + (out / "plots").string()).code == 2);
  fs::remove_all(out);
}

TEST_CASE("report: seeds of one configuration give its mean and a bounded 95% interval",
          "[sweep][report]") {
  // Three seeds at each of three host sizes: hit ratios 0.1, 0.2, 0.3 (mean 0.2, standard error
  // 0.0577, t(2) = 4.303: a symmetric interval would reach -0.048, below 0), 0.5 three times (no
  // spread) and 0.6, 0.7, 0.8 (clear of the others).
  fs::path out = scratch("report-seeds");
  fs::create_directories(out);
  json rows = json::array();
  const double values[3][3] = {{0.1, 0.2, 0.3}, {0.5, 0.5, 0.5}, {0.78, 0.8, 0.82}};
  for (int h = 0; h < 3; ++h)
    for (int s = 0; s < 3; ++s)
      rows.push_back({{"cell", "c" + std::to_string(h) + std::to_string(s)}, {"status", "ok"},
                      {"cache.host_tokens", 100000 * (h + 1)}, {"seed", s + 1},
                      {"hit_ratio.tokens", values[h][s]}});
  std::ofstream(out / "results.json") << json({{"axes", {"cache.host_tokens"}}, {"rows", rows}});
  std::ofstream(out / "results.csv") << "cell\n";
  auto rep = kvtier("report " + out.string());
  INFO(rep.out);
  REQUIRE(rep.code == 0);
  auto figure = json::parse(slurp(out / "plots" / "figures.json"))["hit_ratio_vs_capacity"];
  REQUIRE(line_count(figure) == 1);
  const json& line = figure["panels"][0]["lines"][0];
  CHECK(figure["interval"] == "ratio");
  CHECK(line["y"][0].get<double>() == Approx(0.2));
  // On the logit scale: logit(0.2) -+ 4.303 x 0.0577 / (0.2 x 0.8), mapped back.
  double half = 4.303 * 0.1 / std::sqrt(3.0), w = half / (0.2 * 0.8);
  auto sigmoid = [](double x) { return 1 / (1 + std::exp(-x)); };
  CHECK(line["ci95"][0][0].get<double>() == Approx(sigmoid(std::log(0.25) - w)).epsilon(1e-3));
  CHECK(line["ci95"][0][1].get<double>() == Approx(sigmoid(std::log(0.25) + w)).epsilon(1e-3));
  CHECK(line["ci95"][0][0].get<double>() > 0);
  CHECK(line["seeds"][0] == 3);
  CHECK(line["zero_width"][0] == false);
  CHECK(line["y"][1].get<double>() == Approx(0.5));
  CHECK(line["zero_width"][1] == true);
  CHECK(line["ci95"][1][0].get<double>() == Approx(0.5));
  std::string md = slurp(out / "report.md");
  CHECK(md.find("Student t on the logit scale") != std::string::npos);
  CHECK(md.find("0.5000 ± 0") != std::string::npos);         // said as zero width
  // Best: clear of the others (logit scale: 0.0497 either side at 0.8 becomes +0.0451/-0.0543).
  CHECK(md.find("**0.8000 +0.0451/−0.0543**") != std::string::npos);
  CHECK(md.find(" (tied) |") == std::string::npos);
  // Two overlapping intervals at the top are tied, neither best.
  const double tie[3][3] = {{0.1, 0.11, 0.12}, {0.5, 0.5, 0.5}, {0.49, 0.5, 0.51}};
  for (int h = 0; h < 3; ++h)
    for (int s = 0; s < 3; ++s)
      rows[3 * h + s]["hit_ratio.tokens"] = tie[h][s];
  std::ofstream(out / "results.json") << json({{"axes", {"cache.host_tokens"}}, {"rows", rows}});
  REQUIRE(kvtier("report " + out.string()).code == 0);
  md = slurp(out / "report.md");
  CHECK(md.find("| 200000 | 0.5000 ± 0 (tied) |") != std::string::npos);
  CHECK(md.find("| 300000 | 0.5000 ± 0.0248 (tied) |") != std::string::npos);
  fs::remove_all(out);
}

TEST_CASE("report: an overloaded sweep is flagged in the summary, report.md and the figures",
          "[sweep][report][load]") {
  // The sample as recorded (no sample scenario: a trace named), a workload variant as the
  // study's: eight times the load one instance sustains.
  fs::path out = scratch("report-overloaded");
  auto r = kvtier("sweep --jobs 2 --deterministic --trace " + sample + " --out " + out.string() +
                  " --grid cache.host_tokens=2e5,3.2e6 --seeds 1 --set trace.sample_fraction=0.8"
                  " --set trace.arrival_jitter_s=3 --quiet");
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("sweep: WARNING: 2 of 2 finished cells OVERLOADED (2 by arrivals") !=
        std::string::npos);
  auto results = json::parse(slurp(out / "results.json"));
  for (const auto& row : results["rows"]) {
    CHECK(row["load.overloaded"] == true);
    CHECK(row["load.cause"] == "arrivals");
    CHECK(row["load.advice"].get<std::string>().find("trace.time_scale") != std::string::npos);
  }
  // One figure (a few seconds less than the default eight): the warnings are the same.
  auto rep = kvtier("report " + out.string() + " --metric latency_ms.ttft.p99");
  INFO(rep.out);
  REQUIRE(rep.code == 0);
  std::string md = slurp(out / "report.md");
  CHECK(md.find("**2 of 2 cells OVERLOADED**") != std::string::npos);
  CHECK(md.find("Cause: arrivals outpaced the instance") != std::string::npos);
  CHECK(md.find("OVERLOADED 1/1") != std::string::npos);  // the latency table's load column
  auto figures = json::parse(slurp(out / "plots" / "figures.json"));
  const json& ttft = figures["metric-latency_ms_ttft_p99"];
  CHECK(ttft["title"].get<std::string>().find("WARNING: every point overloaded") !=
        std::string::npos);
  CHECK(ttft["notes"]["marks"]["arrivals"] == 2);
  for (const auto& flags : ttft["panels"][0]["lines"][0]["flags"])
    CHECK(flags["arrivals"] == 1);
  fs::remove_all(out);
}

TEST_CASE("report: a replay slowed by L3 backpressure is told so, not to stretch the trace",
          "[report][load]") {
  // Payloads of 4 KiB in a memory-backed pool with room for two in flight: stores queue behind
  // each other for a third of the run (as recorded, the queue also grows). Under a second.
  fs::path out = scratch("report-backpressure");
  auto r = kvtier("replay --deterministic --trace " + sample + " --out " + out.string() +
                  " --set storage.backend=memory --set storage.payload_bytes=4096"
                  " --set storage.max_inflight_bytes=8192 --set storage.capacity_blocks=20000");
  INFO(r.out);
  REQUIRE(r.code == 0);
  json s = summary_of(out);
  CHECK(s["load"]["overloaded"] == true);
  CHECK(s["load"]["l3_backpressure"] == true);
  CHECK(s["load"]["cause"] == "l3_backpressure");
  std::string advice = s["load"]["advice"];
  CHECK(advice.find("storage.max_inflight_bytes; at most 8.19 kB were") != std::string::npos);
  CHECK(advice.find("stretch the trace") == std::string::npos);
  CHECK(r.out.find("L3 BACKPRESSURE") != std::string::npos);
  CHECK(r.out.find("Cause: the storage backend did not keep up") != std::string::npos);
  CHECK(r.out.find("stretch the trace") == std::string::npos);
  fs::remove_all(out);
}

TEST_CASE("report: a replay that lags the wall clock is told so, in its summary, report and figures",
          "[report][load]") {
  // The sample scenario on the wall clock at 100,000 virtual seconds per wall second: its steps
  // cannot keep up (about 95% of its time late), the queue grows, and the cause is the clock,
  // not the arrivals. Under a second.
  fs::path out = scratch("report-clock-lag");
  fs::path lagged = out / "lagged";
  auto r = kvtier("replay --config " + std::string(KVTIER_SOURCE_DIR) + "/configs/sample.json" +
                  " --clock wall --speed 100000 --out " + lagged.string());
  INFO(r.out);
  REQUIRE(r.code == 0);
  json s = summary_of(lagged);
  CHECK(s["load"]["clock_lag"] == true);
  CHECK(s["load"]["clock_lag_share"].get<double>() > 0.5);
  CHECK(s["load"]["cause"] == "clock_lag");
  std::string advice = s["load"]["advice"];
  CHECK(advice.find("lower --speed") != std::string::npos);
  CHECK(advice.find("stretch the trace") == std::string::npos);
  CHECK(r.out.find("CLOCK LAG") != std::string::npos);
  CHECK(r.out.find("Cause: the machine did not keep up with the wall clock") != std::string::npos);
  // A report over that replay and the same on the virtual clock (which cannot lag), each a
  // cell as a sweep's results.json holds it: the lagged cell is named and marked.
  fs::path steady = out / "virtual";
  REQUIRE(kvtier("replay --deterministic --config " + std::string(KVTIER_SOURCE_DIR) +
                 "/configs/sample.json --out " + steady.string() + " --quiet").code == 0);
  json rows = json::array();
  int clock = 0;
  for (const fs::path& dir : {steady, lagged}) {
    json sum = summary_of(dir);
    json row = {{"cell", dir.filename().string()}, {"status", "ok"}, {"clock", clock++},
                {"latency_ms.ttft.p99", sum["latency_ms"]["ttft"]["p99"]}};
    for (const auto& [key, value] : sum["load"].items()) {
      if (!value.is_array()) {
        row["load." + key] = value;
        continue;
      }
      std::string joined;  // as the sweep flattens a list (sim/sweep/flatten.cpp)
      for (size_t i = 0; i < value.size(); ++i)
        joined += (i ? " | " : "") + value[i].dump();
      row["load." + key] = joined;
    }
    rows.push_back(row);
  }
  std::ofstream(out / "results.json") << json({{"axes", {"clock"}}, {"rows", rows}});
  std::ofstream(out / "results.csv") << "cell\n";
  auto rep = kvtier("report " + out.string() + " --metric latency_ms.ttft.p99");
  INFO(rep.out);
  REQUIRE(rep.code == 0);
  std::string md = slurp(out / "report.md");
  CHECK(md.find("**1 of 2 cells lagged the wall clock (CLOCK LAG)**") != std::string::npos);
  CHECK(md.find("Cause: the machine did not keep up with the wall clock") != std::string::npos);
  CHECK(md.find("lower --speed") != std::string::npos);
  auto figures = json::parse(slurp(out / "plots" / "figures.json"));
  const json& ttft = figures["metric-latency_ms_ttft_p99"];
  CHECK(ttft["notes"]["marks"]["clock_lag"] == 1);
  CHECK(ttft["notes"]["marks"].count("arrivals") == 0);
  fs::remove_all(out);
}
