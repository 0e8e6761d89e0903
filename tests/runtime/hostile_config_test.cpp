// Config and calibration values that once passed the checks: NaN, repeated keys, calibration
// figures outside the ranges of the keys they replace.

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include <unistd.h>

#include "runtime/config/options.hpp"
#include "runtime/config/replay_config.hpp"
#include "runtime/config/deployment_plan.hpp"

using namespace kvtier;
namespace fs = std::filesystem;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const config_error& e) {
    return e.what();
  }
  return "";
}

// A file in the temp folder, removed at scope exit.
struct temp_file {
  explicit temp_file(const std::string& content) {
    static int counter = 0;
    path = (fs::temp_directory_path() / ("kvtier_config_test_" + std::to_string(::getpid()) +
                                         "_" + std::to_string(counter++) + ".json"))
             .string();
    std::ofstream(path) << content;
  }
  ~temp_file() { fs::remove(path); }
  std::string path;
};

std::string calibration(double h2d_gbps, double layer_latency_us) {
  nlohmann::json j = {{"schema", "kvtier.calibration/1"},
                      {"h2d", {{"bandwidth_gbps", h2d_gbps}, {"layer_latency_us", layer_latency_us}}},
                      {"d2h", {{"bandwidth_gbps", 50.0}, {"latency_us", 10.0}}},
                      {"duplex_gbps", 90.0}};
  return j.dump();
}

std::string timed_error(const std::string& calibration_path) {
  return error_of([&] {
    config c;
    c.set("links.calibration=" + calibration_path);
    resolve_plan(c, {});
  });
}

}  // namespace

TEST_CASE("config: NaN and infinities are refused for every number key", "[config][hostile]") {
  for (const option_spec& s : option_specs()) {
    if (s.type != option_type::number && s.type != option_type::integer)
      continue;
    for (double bad : {std::nan(""), std::numeric_limits<double>::infinity(),
                       -std::numeric_limits<double>::infinity()}) {
      config c;
      INFO(s.key << " = " << bad);
      std::string e = error_of([&] { c.merge_json({{s.key, bad}}, "test"); });
      CHECK(e.find(s.key) != std::string::npos);
    }
  }
}

TEST_CASE("config: a range error states the range", "[config][hostile]") {
  config c;
  CHECK(error_of([&] { c.set("trace.time_scale=0"); }).find("a number in [1e-6, 1e6], got 0") !=
        std::string::npos);
  CHECK(error_of([&] { c.set("links.h2d_gbps=0"); }).find("[0.001, 1e6]") != std::string::npos);
  // Every number key says its range in the list `kvtier config` prints.
  std::string keys = valid_keys_text();
  CHECK(keys.find("(a number)") == std::string::npos);
  CHECK(keys.find("trace.time_scale (a number in [1e-6, 1e6])") != std::string::npos);
  CHECK(keys.find("compute.prefill_attention_ns (a number in [0, 1e9])") != std::string::npos);
}

TEST_CASE("config: a key given twice in a config file is refused", "[config][hostile]") {
  temp_file nested(R"({"cache": {"block_size": 16, "block_size": 32}})");
  config c;
  std::string e = error_of([&] { c.merge_file(nested.path); });
  CHECK(e.find(nested.path) != std::string::npos);
  CHECK(e.find("'cache.block_size' appears twice") != std::string::npos);
  temp_file flat(R"({"trace.time_scale": 2, "trace.time_scale": 4})");
  CHECK(error_of([&] { c.merge_file(flat.path); }).find("appears twice") != std::string::npos);
  // The same key in two different objects is no repetition.
  temp_file fine(R"({"cache": {"block_size": 16}, "storage": {"nodes": 2}})");
  CHECK(error_of([&] { c.merge_file(fine.path); }).empty());
  CHECK(c.integer(keys::cache::block_size) == 16);
}

TEST_CASE("config: a config path that is a folder is refused by name", "[config][hostile]") {
  config c;
  std::string dir = fs::temp_directory_path().string();
  std::string e = error_of([&] { c.merge_file(dir); });
  CHECK(e.find(dir) != std::string::npos);
  CHECK(e.find("is a directory") != std::string::npos);
}

TEST_CASE("calibration: values take the ranges of the keys they replace", "[config][hostile]") {
  temp_file slow(calibration(1e-300, 5));
  std::string e = timed_error(slow.path);
  CHECK(e.find(slow.path) != std::string::npos);
  CHECK(e.find("h2d.bandwidth_gbps") != std::string::npos);
  CHECK(e.find("links.h2d_gbps") != std::string::npos);
  CHECK(e.find("[0.001, 1e6]") != std::string::npos);
  temp_file late(calibration(50, 1e300));
  std::string l = timed_error(late.path);
  CHECK(l.find("h2d.layer_latency_us") != std::string::npos);
  CHECK(l.find("[0, 1e9]") != std::string::npos);
  temp_file twice(R"({"schema": "kvtier.calibration/1", "duplex_gbps": 90, "duplex_gbps": 1})");
  CHECK(timed_error(twice.path).find("'duplex_gbps' appears twice") != std::string::npos);
  std::string dir = fs::temp_directory_path().string();
  std::string d = timed_error(dir);
  CHECK(d.find("links.calibration") != std::string::npos);
  CHECK(d.find(dir) != std::string::npos);
  CHECK(d.find("is a directory") != std::string::npos);
  // In range: applied.
  temp_file good(calibration(20, 7));
  config c;
  c.set("links.calibration=" + good.path);
  deployment_plan t = resolve_plan(c, {});
  CHECK(t.instances[0].engine.links.h2d_gbps == 20);
  CHECK(t.instances[0].engine.links.h2d_layer_latency_ns == 7000);
  // No compute section (a file from before the stall was measured): the key's value stays.
  CHECK(t.instances[0].scheduler.compute.layer_wait_ns == 0);
}

TEST_CASE("config: a calibration's layer wait reaches the modelled pipeline, checked",
          "[config][hostile]") {
  nlohmann::json j = nlohmann::json::parse(calibration(20, 7));
  j["compute"] = {{"layer_wait_us", 17.5}};
  temp_file good(j.dump());
  config c;
  c.set("links.calibration=" + good.path);
  deployment_plan t = resolve_plan(c, {});
  CHECK(t.instances[0].engine.links.h2d_layer_wait_ns == 17500);
  CHECK(t.instances[0].scheduler.compute.layer_wait_ns == 17500);
  config k;
  k.set("links.h2d_layer_wait_us=3");
  CHECK(resolve_plan(k, {}).instances[0].scheduler.compute.layer_wait_ns == 3000);
  j["compute"] = {{"layer_wait_us", -1}};
  temp_file bad(j.dump());
  std::string e = timed_error(bad.path);
  CHECK(e.find("compute.layer_wait_us") != std::string::npos);
  CHECK(e.find("links.h2d_layer_wait_us") != std::string::npos);
}

TEST_CASE("config: a calibration's swap-in submission per block reaches the modelled pipeline, "
          "checked",
          "[config][hostile]") {
  nlohmann::json j = nlohmann::json::parse(calibration(20, 7));
  temp_file plain(j.dump());  // a file with no submission figure: the key's value stays
  config none;
  none.set("links.calibration=" + plain.path);
  CHECK(resolve_plan(none, {}).instances[0].scheduler.compute.swap_in_submit_ns_per_block == 0);
  j["h2d"]["submit_us_per_block"] = 52.5;
  temp_file good(j.dump());
  config c;
  c.set("links.calibration=" + good.path);
  deployment_plan t = resolve_plan(c, {});
  CHECK(t.instances[0].engine.links.h2d_submit_ns_per_block == 52500);
  CHECK(t.instances[0].scheduler.compute.swap_in_submit_ns_per_block == 52500);
  config k;
  k.set("links.h2d_submit_us_per_block=4");
  CHECK(resolve_plan(k, {}).instances[0].scheduler.compute.swap_in_submit_ns_per_block == 4000);
  j["h2d"]["submit_us_per_block"] = -1;
  temp_file bad(j.dump());
  std::string e = timed_error(bad.path);
  CHECK(e.find("h2d.submit_us_per_block") != std::string::npos);
  CHECK(e.find("links.h2d_submit_us_per_block") != std::string::npos);
}
