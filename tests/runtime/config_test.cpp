#include "runtime/config/options.hpp"
#include "runtime/config/replay_config.hpp"
#include "runtime/config/storage_calibration.hpp"
#include "runtime/config/deployment_plan.hpp"

#include <cstdio>
#include <fstream>
#include <unistd.h>

#include <catch2/catch.hpp>

using namespace kvtier;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const config_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("config: the defaults cover every key and resolve", "[config]") {
  config c;
  auto eff = c.effective();
  for (const auto& s : option_specs()) {
    std::string key = s.key;
    auto dot = key.find('.');
    INFO(key);
    CHECK(eff[key.substr(0, dot)].contains(key.substr(dot + 1)));
  }
  replay_config r = resolve(c);
  CHECK(r.block_size == 64);
  CHECK(r.cache.device_blocks == 800000 / 64);
  CHECK(r.model.bytes_per_token() == 2ull * 32 * 8 * 128 * 2);
}

TEST_CASE("config: --set overrides with typed values", "[config]") {
  config c;
  c.set("cache.block_size=16");
  c.set("cache.device_tokens=1e9");
  c.set("cache.write_policy=write_back");
  c.set("cache.eviction=\"lfu\"");
  replay_config r = resolve(c);
  CHECK(r.block_size == 16);
  CHECK(r.cache.device_blocks == 62500000);
  CHECK(r.cache.policy == write_policy::write_back);
  CHECK(r.cache.eviction == eviction_policy::lfu);
}

TEST_CASE("config: a capacity set in blocks replaces the default in tokens", "[config]") {
  config c;
  c.set("cache.host_blocks=10");
  CHECK_FALSE(c.is_set(keys::cache::host_tokens));
  CHECK(resolve(c).cache.host_blocks == 10);
  nlohmann::json both = {{"cache", {{"device_tokens", 64}, {"device_blocks", 2}}}};
  CHECK(error_of([&] { c.merge_json(both, "x.json"); }).find("only one of") != std::string::npos);
}

TEST_CASE("config: unknown keys and bad values are errors naming the key", "[config]") {
  config c;
  std::string e = error_of([&] { c.set("cache.blok_size=16"); });
  CHECK(e.find("unknown config key 'cache.blok_size'") != std::string::npos);
  CHECK(e.find("cache.block_size") != std::string::npos);  // the valid keys are listed
  e = error_of([&] { c.set("cache.block_size=abc"); });
  CHECK(e.find("cache.block_size: expected an integer") != std::string::npos);
  e = error_of([&] { c.set("cache.block_size=0"); });
  CHECK(e.find("expected an integer in [1, 32768]") != std::string::npos);
  e = error_of([&] { c.set("cache.write_policy=sometimes"); });
  CHECK(e.find("one of write_through, write_through_selective, write_back") != std::string::npos);
  e = error_of([&] { c.set("cache.block_size"); });
  CHECK(e.find("expected key=value") != std::string::npos);
  e = error_of([&] { c.merge_file("/nonexistent/kvtier.json"); });
  CHECK(e.find("cannot open") != std::string::npos);
}

TEST_CASE("config: inconsistent settings are refused when resolved", "[config]") {
  config c;
  c.set("cache.host_tokens=0");
  CHECK(error_of([&] { resolve(c); }).find("needs a host tier") != std::string::npos);
  c.set("storage.capacity_tokens=0");
  CHECK(resolve(c).storage_blocks == 0);
  c.set("cache.device_tokens=10");  // less than one block
  CHECK(error_of([&] { resolve(c); }).find("at least one block") != std::string::npos);
}

TEST_CASE("config: storage keys differ by model and dtype", "[config]") {
  config a, b, c;
  b.set("model.name=other");
  c.set("model.kv_dtype=fp8");
  CHECK(resolve(a).storage_namespace != resolve(b).storage_namespace);
  CHECK(resolve(a).storage_namespace != resolve(c).storage_namespace);
  CHECK(resolve(c).model.dtype_bytes == 1);
}

TEST_CASE("config: text that is not UTF-8 is refused naming the key", "[config]") {
  // A --set value is whatever bytes the shell passed; summary.json could not hold it.
  config c;
  std::string bytes = "\xff\xfe";
  for (const std::string& key : {"cache.write_policy", "model.name"}) {
    INFO(key);
    try {
      c.set(key + "=" + bytes);
      FAIL("accepted");
    } catch (const config_error& e) {
      CHECK(std::string(e.what()).find(key) != std::string::npos);
    }
  }
  CHECK(c.effective()["model"]["name"] == "llama3-8b");
}

TEST_CASE("config: a number beyond double's range is refused naming the file", "[config]") {
  // JSON's grammar allows 61e308; it overflows a double (found by fuzz_config).
  std::string path = "/tmp/kvtier-config-test-" + std::to_string(::getpid()) + ".json";
  std::ofstream(path) << "{\"cache\": {\"block_size\": 61e308}}";
  std::string e = error_of([&] { config().merge_file(path); });
  CHECK(e.find(path + ": not valid JSON") == 0);
  // A calibration file is read the same way.
  std::ofstream(path) << "{\"schema\": \"kvtier.calibration/1\", \"duplex_gbps\": 1e999}";
  config c;
  c.set("links.calibration=" + path);
  std::string calibration = error_of([&] { resolve_plan(c, {}); });
  CHECK(calibration.find("links.calibration: " + path + ": not valid JSON") == 0);
  std::remove(path.c_str());
}

TEST_CASE("config: preemption modes and prefetch policies resolve, and need their tiers",
          "[config][preemption]") {
  config c;
  deployment_plan t = resolve_plan(c, {});
  CHECK(t.instances[0].scheduler.options.preemption == preemption_mode::recompute);
  CHECK(t.instances[0].controller.preemption == preemption_mode::recompute);
  CHECK(t.instances[0].controller.prefetch == prefetch_policy::wait_complete);
  CHECK(t.instances[0].controller.prefetch_threshold_tokens == 0);
  CHECK(t.instances[0].controller.prefetch_capacity_blocks == 0);
  c.set("scheduler.preemption=save_to_storage");
  c.set("storage.prefetch_policy=timeout");
  c.set("storage.prefetch_timeout_ms=50");
  c.set("storage.prefetch_timeout_per_ki_token_ms=2.5");
  c.set("storage.prefetch_threshold_tokens=256");
  c.set("storage.prefetch_capacity_blocks=1000");
  t = resolve_plan(c, {});
  CHECK(t.instances[0].scheduler.options.preemption == preemption_mode::save_to_storage);
  CHECK(t.instances[0].controller.preemption == preemption_mode::save_to_storage);
  CHECK(t.instances[0].controller.prefetch == prefetch_policy::timeout);
  CHECK(t.instances[0].controller.prefetch_timeout_ns == 50'000'000);
  CHECK(t.instances[0].controller.prefetch_timeout_per_ki_token_ns == 2'500'000);
  CHECK(t.instances[0].controller.prefetch_threshold_tokens == 256);
  CHECK(t.instances[0].controller.prefetch_capacity_blocks == 1000);
  // save_to_storage without a storage tier, swap_to_host without a host tier: refused.
  c.set("storage.capacity_tokens=0");
  std::string e = error_of([&] { resolve_plan(c, {}); });
  CHECK(e.find("scheduler.preemption=save_to_storage") != std::string::npos);
  CHECK(e.find("no storage tier") != std::string::npos);
  c.set("scheduler.preemption=swap_to_host");
  CHECK(resolve_plan(c, {}).instances[0].controller.preemption == preemption_mode::swap_to_host);
  c.set("cache.host_tokens=0");
  e = error_of([&] { resolve_plan(c, {}); });
  CHECK(e.find("scheduler.preemption=swap_to_host") != std::string::npos);
  CHECK(e.find("no host tier") != std::string::npos);
  // Unknown names are errors that list what is valid.
  e = error_of([&] { c.set("scheduler.preemption=swap"); });
  CHECK(e.find("recompute") != std::string::npos);
  e = error_of([&] { c.set("storage.prefetch_policy=eager"); });
  CHECK(e.find("best_effort") != std::string::npos);
}

TEST_CASE("config: storage.read_op_latency_us gives gets their own latency, and null follows the "
          "op latency", "[config][storage]") {
  config c;
  CHECK_FALSE(c.is_set(keys::storage::read_op_latency_us));
  deployment_plan t = resolve_plan(c, {});
  CHECK(t.storage.pool.op_latency_ns == 100'000);
  CHECK_FALSE(t.storage.pool.read_op_latency_ns.has_value());
  c.set("storage.read_op_latency_us=42.5");
  c.set("storage.op_latency_us=250");
  t = resolve_plan(c, {});
  CHECK(t.storage.pool.op_latency_ns == 250'000);
  CHECK(t.storage.pool.read_op_latency_ns == 42'500);
  c.set("storage.read_op_latency_us=0");  // in range: a read side without latency
  CHECK(resolve_plan(c, {}).storage.pool.read_op_latency_ns == 0);
  c.set("storage.read_op_latency_us=null");
  CHECK_FALSE(resolve_plan(c, {}).storage.pool.read_op_latency_ns.has_value());
  std::string e = error_of([&] { c.set("storage.read_op_latency_us=-1"); });
  INFO(e);
  CHECK(e == "--set storage.read_op_latency_us=-1: storage.read_op_latency_us: expected a number "
             "in [0, 1e9] or null, got -1");
  e = error_of([&] { c.set("storage.read_op_latency_us=\"fast\""); });
  CHECK(e.find("storage.read_op_latency_us") != std::string::npos);
}

TEST_CASE("config: a storage calibration round-trips, the read latency included",
          "[config][storage]") {
  std::string path = "/tmp/kvtier-storage-calibration-test-" + std::to_string(::getpid()) + ".json";
  storage_calibration cal;
  cal.backend = "file";
  cal.block_bytes = 1 << 20;
  cal.batch = 32;
  cal.lone_gap_ms = 100;
  cal.read_gbps = 6.5;
  cal.write_gbps = 3.25;
  cal.op_latency_us = 120.4;
  cal.read_op_latency_us = 45.6;
  cal.stream_read_gbps = 4.5;
  cal.stream_write_gbps = 1.75;
  std::ofstream(path) << to_json(cal).dump(2);
  config c;
  c.set("storage.calibration=" + path);
  c.set("storage.read_op_latency_us=999");  // the calibration's measurement replaces it
  storage_options s = resolve_plan(c, {}).storage.pool;
  CHECK(s.read_gbps == 6.5);
  CHECK(s.write_gbps == 3.25);
  CHECK(s.op_latency_ns == 120'400);
  CHECK(s.read_op_latency_ns == 45'600);
  CHECK(s.stream_read_gbps == 4.5);
  CHECK(s.stream_write_gbps == 1.75);
  // A file written before the read latency was measured: gets follow the op latency (or the
  // config's read latency, where set).
  nlohmann::json old = to_json(cal);
  old.erase("read_op_latency_us");
  std::ofstream(path) << old.dump(2);
  config plain;
  plain.set("storage.calibration=" + path);
  CHECK_FALSE(resolve_plan(plain, {}).storage.pool.read_op_latency_ns.has_value());
  CHECK(resolve_plan(c, {}).storage.pool.read_op_latency_ns == 999'000);
  // A measured latency that is not a positive number is refused, naming the file and field.
  old["read_op_latency_us"] = -3;
  std::ofstream(path) << old.dump(2);
  std::string e = error_of([&] { resolve_plan(plain, {}); });
  CHECK(e == "storage.calibration: " + path +
               ": field 'read_op_latency_us': expected a positive number");
  std::remove(path.c_str());
}

TEST_CASE("config: the default preemption is recompute even with a storage tier",
          "[config][preemption]") {
  // FastDeploy saves a victim to storage by default; kvtier keeps one default whatever the
  // tiers (docs/fastdeploy.md §4).
  config c;
  replay_config r = resolve(c);
  REQUIRE(r.cache.storage_tier);
  CHECK(resolve_plan(c, {}).instances[0].scheduler.options.preemption ==
        preemption_mode::recompute);
}

TEST_CASE("config: cache.prefix_caching switches matching off", "[config]") {
  config c;
  CHECK(resolve(c).cache.caching == prefix_caching::on);
  c.set("cache.prefix_caching=false");
  CHECK(resolve(c).cache.caching == prefix_caching::off);
  std::string e = error_of([&] { c.set("cache.prefix_caching=maybe"); });
  CHECK(e.find("cache.prefix_caching") != std::string::npos);
}
