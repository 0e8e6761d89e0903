// Real GPU attach (docs/protocol.md, real mode): `kvtier engine-sim --backend cuda` owns the KV
// tensors and exports them with CUDA IPC; `kvtier serve --backend cuda --verify` opens them and
// runs its swap-ins into them, signalling each layer through IPC events that the engine waits
// on in its own stream. The engine checks every swapped-in block's bytes after its layer
// events. Two processes, as CUDA IPC needs. Skipped, visibly, without a CUDA device.

#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>

#include <nlohmann/json.hpp>

#include "actors/device/engine_device.hpp"
#include "gpu/device_info.hpp"
#include "tests/gpu/test_shapes.hpp"

namespace {

// The kvtier binary and source tree as built, or as KVTIER_TEST_BINARY and KVTIER_TEST_SOURCE
// name them: the GPU host runs these tests from a bundle, not from the build tree.
const char* test_binary() {
  const char* env = std::getenv("KVTIER_TEST_BINARY");
  return env ? env : KVTIER_BINARY_BUILT;
}
std::string source_dir() {
  const char* env = std::getenv("KVTIER_TEST_SOURCE");
  return env ? env : KVTIER_SOURCE_DIR;
}

}  // namespace

#define KVTIER_BINARY test_binary()
#include "tests/serve/serve_process.hpp"

namespace fs = std::filesystem;
using kvtier::test::serve_process;

namespace {

// Small tiers: a 32-layer, 64-token-block model has 8 MiB blocks, so 256 device blocks (2 GiB)
// and 1,024 host blocks (8 GiB) fit any GPU host. traces/emulation_check.jsonl (36 requests in
// 11 s) is made for them: 24 of its requests swap in from host memory (docs/gpu.md).
const std::vector<std::string> tiers = {
  "--set", "cache.device_blocks=256", "--set", "cache.host_blocks=1024",
  "--set", "storage.capacity_tokens=0"};

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v)
    out += " " + s;
  return out;
}

// Runs a command; its exit code, with stdout and stderr in `out`.
int run(const std::string& command, std::string& out) {
  out.clear();
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  REQUIRE(p != nullptr);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0)
    out.append(buf, n);
  int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

uint64_t number_after(const std::string& text, const std::string& pattern) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(pattern)))
    return ~0ull;
  return std::stoull(m[1].str());
}

void verified_trace(const std::string& engine_options) {
  fs::path dir = fs::temp_directory_path() / ("kvtier-gpu-attach-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::string trace = source_dir() + "/traces/emulation_check.jsonl";
  std::vector<std::string> serve_args = {"--backend", "cuda", "--verify"};
  serve_args.insert(serve_args.end(), tiers.begin(), tiers.end());
  serve_process s(serve_args);
  std::string out;
  int code = run(std::string(KVTIER_BINARY) + " engine-sim --backend cuda --verify --connect "
                   + s.endpoint() + " --trace " + trace + join(tiers) + engine_options + " --out "
                   + (dir / "sim").string(),
                 out);
  INFO(out);
  INFO(s.output());
  REQUIRE(code == 0);
  // The figures, for the record of a device run.
  std::smatch line;
  if (std::regex_search(out, line, std::regex(R"(verify: [^\n]*)")))
    std::printf("engine-sim %s\n", line.str().c_str());
  uint64_t blocks = number_after(out, R"(verify: (\d+) blocks of \d+ swap-ins)");
  uint64_t mismatches = number_after(out, R"(checked after their layer events, (\d+) mismatches)");
  CHECK(blocks > 0);
  CHECK(blocks != ~0ull);
  CHECK(mismatches == 0);
  CHECK(s.stop() == 0);
  fs::remove_all(dir);
}

nlohmann::json summary(const fs::path& dir) {
  std::ifstream in(dir / "summary.json");
  REQUIRE(in);
  return nlohmann::json::parse(in);
}

// engine-sim with `engine_options` through a server with `serve_options` (and the small tiers);
// its output in `out`, its summary under `dir`.
int engine_sim_through(const std::vector<std::string>& serve_options,
                       const std::string& engine_options, const fs::path& dir, std::string& out) {
  std::vector<std::string> serve_args = serve_options;
  serve_args.insert(serve_args.end(), tiers.begin(), tiers.end());
  serve_process s(serve_args);
  int code = run(std::string(KVTIER_BINARY) + " engine-sim --connect " + s.endpoint()
                   + " --trace " + source_dir() + "/traces/emulation_check.jsonl" + join(tiers)
                   + engine_options + " --out " + dir.string(),
                 out);
  out += s.output();
  CHECK(s.stop() == 0);
  return code;
}

}  // namespace

// Version 3 (docs/protocol.md, the engine-owned device tier): engine-sim's own allocator owns the
// device blocks of its tensors; the server loads host hits into the blocks it names and saves
// from them. Every swapped-in block holds its pattern, and the hits are those of the same run
// through the modelled engine-owned tier.
TEST_CASE("gpu attach: the engine-owned device tier on the engine's tensors, verified",
          "[gpu][attach]") {
  fs::path dir = fs::temp_directory_path() / ("kvtier-gpu-attach-v3-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  std::string out;
  REQUIRE(engine_sim_through({"--backend", "cuda", "--verify"},
                             " --device-owner engine --backend cuda --verify", dir / "real", out)
          == 0);
  INFO(out);
  std::smatch line;
  if (std::regex_search(out, line, std::regex(R"(verify: [^\n]*)")))
    std::printf("engine-sim v3 %s\n", line.str().c_str());
  CHECK(number_after(out, R"(verify: (\d+) blocks of \d+ swap-ins)") > 0);
  CHECK(number_after(out, R"(checked after their layer events, (\d+) mismatches)") == 0);
  std::string modelled;
  REQUIRE(engine_sim_through({}, " --device-owner engine --quiet", dir / "modelled", modelled)
          == 0);
  nlohmann::json real = summary(dir / "real"), model = summary(dir / "modelled");
  std::printf("engine-sim v3 hit ratios: real %s, modelled %s\n",
              real["hit_ratio"].dump().c_str(), model["hit_ratio"].dump().c_str());
  // Both on the wall clock: a run that fell behind (lag over 1%) may shift steps, and hits.
  if (real["simulation"]["lag_share"].get<double>() > 0.01
      || model["simulation"]["lag_share"].get<double>() > 0.01)
    WARN("a run fell behind the clock: hit ratios not compared");
  else
    CHECK(real["hit_ratio"] == model["hit_ratio"]);
  CHECK(real["hit_ratio"]["by_tier"]["host"]["blocks"].get<double>() > 0);
  fs::remove_all(dir);
}

TEST_CASE("gpu attach: a trace through engine-sim and serve on the engine's tensors, verified",
          "[gpu][attach]") {
  verified_trace("");
}

TEST_CASE("gpu attach: one IPC event slot, re-recorded every swap-in, still verified",
          "[gpu][attach]") {
  // The engine issues a reply's waits before its next step, so a single slot suffices.
  verified_trace(" --event-slots 1");
}

TEST_CASE("gpu attach: the engine's check counts blocks that do not hold their pattern",
          "[gpu][attach]") {
  // Blocks never written hold no pattern: every one is counted, and the first is described.
  kvtier::engine_device_options o;
  o.shape = kvtier::gpu::test::kv_of(4, 2, 64, 2);
  o.block_size = 16;
  o.device_blocks = 32;
  o.event_slots = 2;
  kvtier::engine_device gpu(o);
  CHECK(gpu.tensors().size() == 4);
  CHECK(gpu.events().size() == 8);
  std::vector<kvtier::gpu::block_pattern> blocks = {{3, 11}, {7, 12}, {8, 13}};
  // No server recorded slot 1's events: waiting on them passes at once (an IPC wait before any
  // record), and the check finds every block wrong.
  CHECK(gpu.wait_and_check(1, blocks) == 3);
  kvtier::engine_verify_counts v = gpu.verified();
  CHECK(v.blocks == 3);
  CHECK(v.mismatches == 3);
  CHECK_THAT(v.first, Catch::Contains("block 3"));
}

TEST_CASE("gpu attach: bench_swap loads host blocks into the engine's tensors, verified",
          "[gpu][attach]") {
  std::vector<std::string> serve_args = {"--backend", "cuda"};
  serve_args.insert(serve_args.end(), tiers.begin(), tiers.end());
  serve_process s(serve_args);
  std::string out;
  int code = run(std::string(KVTIER_BINARY) + " engine-sim --backend cuda --swap-bench 64 "
                   "--swap-bench-repeats 3 --connect " + s.endpoint() + join(tiers),
                 out);
  INFO(out);
  REQUIRE(code == 0);
  std::smatch line;
  if (std::regex_search(out, line, std::regex(R"(swap bench: [^\n]*)")))
    std::printf("engine-sim %s\n", line.str().c_str());
  CHECK(number_after(out, R"(swap bench verify: (\d+) blocks)") == 64);
  CHECK(number_after(out, R"(layer events, (\d+) mismatches)") == 0);
  // The server serves one engine's tensors for its life: another engine process is refused.
  CHECK(run(std::string(KVTIER_BINARY) + " engine-sim --backend cuda --quiet --connect "
              + s.endpoint() + " --trace " + source_dir() + "/traces/emulation_check.jsonl"
              + join(tiers) + " --out " + (fs::temp_directory_path() / "kvtier-gpu-attach-bench")
              .string(), out) == 2);
  CHECK_THAT(out, Catch::Contains("attached to another engine's tensors"));
  fs::remove_all(fs::temp_directory_path() / "kvtier-gpu-attach-bench");
  CHECK(s.stop() == 0);
}

TEST_CASE("gpu attach: a modelled engine is refused by a real server, and bad sizes too",
          "[gpu][attach]") {
  std::vector<std::string> serve_args = {"--backend", "cuda"};
  serve_args.insert(serve_args.end(), tiers.begin(), tiers.end());
  serve_process s(serve_args);
  std::string out;
  const std::string engine = std::string(KVTIER_BINARY) + " engine-sim --quiet --connect "
                             + s.endpoint() + " --trace " + source_dir()
                             + "/traces/emulation_check.jsonl" + join(tiers);
  // A hello of protocol version 1 (no tensors) to a real server: refused, bad input.
  CHECK(run(engine, out) == 2);
  CHECK_THAT(out, Catch::Contains("it needs protocol version 2 or later"));
  // Another device tier than the server's: refused at hello by the config check (before its
  // tensors are looked at), naming the key and both values.
  CHECK(run(engine + " --backend cuda --set cache.device_blocks=128", out) == 2);
  CHECK_THAT(out, Catch::Contains("config_mismatch: cache.device_blocks is 128 at the engine"));
  // --verify against a server that does not fill patterns: refused before the replay.
  CHECK(run(engine + " --backend cuda --verify", out) == 2);
  CHECK_THAT(out, Catch::Contains("start kvtier serve with --verify"));
  CHECK(s.stop() == 0);
}

int main(int argc, char** argv) {
  kvtier::gpu::device_info info = kvtier::gpu::query_device(0);
  if (!info.available) {
    std::printf("skipped: no CUDA device (%s)\n", info.reason.c_str());
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
