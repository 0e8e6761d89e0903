// The sweep's tidy tables and the report's figures as a reader of a paper needs them
// (docs/sweep.md "Reports", docs/outputs.md "kvtier sweep"): results.csv holds grid values and
// metrics only, results_long.csv every metric with its unit; each figure comes as PNG (200 dpi
// or more), SVG and PDF, and draws one line per configuration whose points are that
// configuration's own cells, never a mean over another grid axis.

#include <catch2/catch.hpp>

#include <cmath>
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

  // Options: a filter leaves one storage mode (one panel, 2 lines); the series and facet are
  // chosen; an unknown axis is bad input.
  auto opt = kvtier("report " + out.string() + " --filter cache.storage_write=never"
                    " --metric latency_ms.ttft.p50 --logy");
  INFO(opt.out);
  REQUIRE(opt.code == 0);
  figures = json::parse(slurp(plots / "figures.json"));
  const json& p50 = figures["latency_ms_ttft_p50"];
  CHECK(p50["panels"].size() == 1);
  CHECK(line_count(p50) == 2);
  CHECK(p50["constants"]["cache.storage_write"] == "never");
  auto swapped = kvtier("report " + out.string() + " --series cache.storage_write"
                        " --facet cache.write_policy --metric hit_ratio.tokens");
  REQUIRE(swapped.code == 0);
  figures = json::parse(slurp(plots / "figures.json"));
  CHECK(figures["hit_ratio_vs_capacity"]["facet"] == "cache.write_policy");
  CHECK(figures["hit_ratio_vs_capacity"]["panels"].size() == 2);
  CHECK(line_count(figures["hit_ratio_vs_capacity"]) == 4);
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

TEST_CASE("report: seeds of one configuration give its mean and 95% t-interval",
          "[sweep][report]") {
  // Three seeds at each of two host sizes: hit ratios 0.1, 0.2, 0.3 (mean 0.2, standard error
  // 0.0577, t(2) = 4.303) and 0.5 three times (no spread).
  fs::path out = scratch("report-seeds");
  fs::create_directories(out);
  json rows = json::array();
  const double values[2][3] = {{0.1, 0.2, 0.3}, {0.5, 0.5, 0.5}};
  for (int h = 0; h < 2; ++h)
    for (int s = 0; s < 3; ++s)
      rows.push_back({{"cell", "c" + std::to_string(h) + std::to_string(s)}, {"status", "ok"},
                      {"cache.host_tokens", h ? 400000 : 100000}, {"seed", s + 1},
                      {"hit_ratio.tokens", values[h][s]}});
  std::ofstream(out / "results.json") << json({{"axes", {"cache.host_tokens"}}, {"rows", rows}});
  std::ofstream(out / "results.csv") << "cell\n";
  auto rep = kvtier("report " + out.string());
  INFO(rep.out);
  REQUIRE(rep.code == 0);
  auto figure = json::parse(slurp(out / "plots" / "figures.json"))["hit_ratio_vs_capacity"];
  REQUIRE(line_count(figure) == 1);
  const json& line = figure["panels"][0]["lines"][0];
  CHECK(line["y"][0].get<double>() == Approx(0.2));
  CHECK(line["ci95"][0].get<double>() == Approx(4.303 * 0.1 / std::sqrt(3.0)).epsilon(1e-3));
  CHECK(line["seeds"][0] == 3);
  CHECK(line["y"][1].get<double>() == Approx(0.5));
  CHECK(line["ci95"][1].get<double>() == Approx(0.0).margin(1e-12));
  CHECK(slurp(out / "report.md").find("95% t-interval") != std::string::npos);
  fs::remove_all(out);
}
