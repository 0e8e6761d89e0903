// timeseries.csv (output.timeseries; docs/outputs.md): one row per second of the replay, whose
// hit and computed-token columns add up to summary.json's totals, whose fractions are fractions,
// and whose sampling changes nothing of the replay; deterministic in virtual time.

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "runtime/config/options.hpp"
#include "sim/driver/replay_driver.hpp"

using namespace kvtier;
namespace fs = std::filesystem;

namespace {

struct temp_dir {
  fs::path path;
  temp_dir() {
    std::string t = (fs::temp_directory_path() / "kvtier-series-XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~temp_dir() { fs::remove_all(path); }
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

replay_job sample_job(const fs::path& out, bool series) {
  replay_job job;
  job.traces = {KVTIER_SAMPLE_TRACE};
  job.deterministic = true;
  job.out_dir = out.string();
  job.cfg.set("trace.time_scale=4");  // not overloaded: the queue drains between bursts
  if (series)
    job.cfg.set("output.timeseries=true");
  return job;
}

// Columns by name, one vector of values per column.
std::map<std::string, std::vector<double>> read_series(const fs::path& p) {
  std::ifstream in(p);
  std::string line, field;
  std::getline(in, line);
  std::vector<std::string> names;
  std::stringstream head(line);
  while (std::getline(head, field, ','))
    names.push_back(field);
  std::map<std::string, std::vector<double>> cols;
  while (std::getline(in, line)) {
    std::stringstream row(line);
    for (size_t i = 0; std::getline(row, field, ','); ++i)
      cols[names.at(i)].push_back(std::stod(field));
  }
  return cols;
}

double sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v)
    s += x;
  return s;
}

}  // namespace

TEST_CASE("timeseries: per-second rows add up to the summary's totals", "[timeseries]") {
  temp_dir with, again, without;
  run_replay_job(sample_job(with.path, true));
  auto summary = nlohmann::json::parse(slurp(with.path / "summary.json"));
  auto cols = read_series(with.path / "timeseries.csv");
  REQUIRE(cols.size() == 17);
  const auto& second = cols["second"];
  double virtual_s = summary["simulation"]["virtual_s"].get<double>();
  CHECK(second.size() == static_cast<size_t>(std::ceil(virtual_s)));
  for (size_t k = 0; k < second.size(); ++k)
    CHECK(second[k] == double(k));
  for (const char* t : {"device", "host", "storage"})
    CHECK(sum(cols[std::string(t) + "_hit_tokens"])
          == summary["hits"]["tokens"][t].get<double>());
  CHECK(sum(cols["computed_tokens"]) == summary["steps"]["prefill_tokens"].get<double>());
  CHECK(sum(cols["device_hit_tokens"]) + sum(cols["host_hit_tokens"]) > 0);
  for (const char* link : {"h2d_busy", "d2h_busy", "storage_read_busy", "storage_write_busy"})
    for (double f : cols[link]) {
      CHECK(f >= 0.0);
      CHECK(f <= 1.0);
    }
  // Each link's blocks, spread over its transfers' seconds, add up to the bytes it moved.
  double block_bytes = summary["model"]["kv_bytes_per_token"].get<double>()
                       * summary["config"]["cache"]["block_size"].get<double>();
  for (const char* link : {"h2d", "d2h", "storage_read", "storage_write"}) {
    double blocks = sum(cols[std::string(link) + "_blocks"]);
    CHECK(blocks * block_bytes
          == Approx(summary["traffic"][std::string(link) + "_bytes"].get<double>())
               .epsilon(0.001));
  }
  CHECK(sum(cols["d2h_blocks"]) > 0);
  // The D2H link's busy seconds are its transfers' time, overlaps counted once.
  CHECK(sum(cols["d2h_busy"]) > 0);
  CHECK(sum(cols["d2h_busy"]) <= summary["traffic"]["d2h_transfer_s"].get<double>() + 1e-3);
  double peak_device = 0, peak_running = 0;
  for (size_t k = 0; k < second.size(); ++k) {
    peak_device = std::max(peak_device, cols["device_blocks"][k]);
    peak_running = std::max(peak_running, cols["running_requests"][k]);
    CHECK(cols["waiting_requests"][k] >= 0);
  }
  CHECK(peak_device > 0);
  CHECK(peak_running > 0);
  // Mean requests in the system, summed over seconds: their time from arrival to finish.
  double e2e_s = summary["latency_ms"]["e2e"]["mean"].get<double>() / 1e3
                 * summary["requests"]["finished"].get<double>();
  CHECK(sum(cols["waiting_requests"]) + sum(cols["running_requests"])
        == Approx(e2e_s).epsilon(0.001));

  // Deterministic, and sampling changes nothing of the replay.
  run_replay_job(sample_job(again.path, true));
  CHECK(slurp(again.path / "timeseries.csv") == slurp(with.path / "timeseries.csv"));
  run_replay_job(sample_job(without.path, false));
  CHECK_FALSE(fs::exists(without.path / "timeseries.csv"));
  CHECK(slurp(without.path / "summary.json") == slurp(with.path / "summary.json"));
  CHECK(slurp(without.path / "requests.csv") == slurp(with.path / "requests.csv"));
}

TEST_CASE("timeseries: a hit-rate replay has no clock for one", "[timeseries]") {
  temp_dir out;
  replay_job job = sample_job(out.path, true);
  job.mode = replay_mode::hitrate;
  CHECK_THROWS_AS(run_replay_job(job), config_error);
}
