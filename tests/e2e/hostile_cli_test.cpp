// Hostile inputs on the command line: each case once crashed, hung, wrote outputs one at a time,
// or exited 0 with wrong figures. Each now fails cleanly (exit 2 for bad input, 1 for a failed
// write) and leaves earlier outputs as they were.

#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <functional>
#include <vector>
#include <thread>
#include <tuple>

#include <fcntl.h>
#include <sys/stat.h>

#include "cli_support.hpp"

using namespace cli_test;

namespace {

const std::string sample = std::string(KVTIER_SOURCE_DIR) + "/traces/mooncake_conversation_sample.jsonl";

fs::path write_file(const fs::path& path, const std::string& content) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Files in `dir` whose name holds ".tmp." or ".old." (what an output commit leaves behind).
int leftovers(const fs::path& dir) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    n += contains(name, ".tmp.") || contains(name, ".old.");
  }
  return n;
}

double seconds_of(const std::function<void()>& f) {
  auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

const std::string azure_header = "TIMESTAMP,ContextTokens,GeneratedTokens\n";

}  // namespace

TEST_CASE("hostile: Azure rows centuries apart exit 2 and leave nothing", "[cli][hostile]") {
  fs::path dir = scratch("azure-far");
  fs::path trace = write_file(dir / "far.csv", azure_header + "1700-01-01 00:00:00,10,5\n"
                                                              "2200-01-01 00:00:00,10,5\n");
  for (std::string mode : {"hitrate", "full"}) {
    fs::path out = dir / ("out-" + mode);
    auto r = kvtier("replay --quiet --mode " + mode + " --trace " + trace.string() + " --out " +
                    out.string());
    INFO(mode << ": " << r.out);
    CHECK(r.code == 2);
    CHECK(contains(r.out, "far.csv:3: field 'TIMESTAMP'"));
    CHECK_FALSE(fs::exists(out));  // no temporaries, and no new empty folder
  }
  fs::remove_all(dir);
}

TEST_CASE("hostile: the two outputs are replaced together or not at all", "[cli][hostile]") {
  for (std::string mode : {"hitrate", "full"}) {
    fs::path out = scratch("together-" + mode);
    fs::create_directories(out / "summary.json");  // the summary cannot be renamed into place
    write_file(out / "requests.csv", "old");
    auto r = kvtier("replay --quiet --mode " + mode + " --out " + out.string());
    INFO(mode << ": " << r.out);
    CHECK(r.code == 1);
    CHECK(contains(r.out, "summary.json: cannot write"));
    CHECK(slurp(out / "requests.csv") == "old");
    CHECK(leftovers(out) == 0);
    // Once the obstacle is gone, both are written.
    fs::remove(out / "summary.json");
    auto ok = kvtier("replay --quiet --mode " + mode + " --out " + out.string());
    CHECK(ok.code == 0);
    CHECK(slurp(out / "requests.csv").size() > 1000);
    CHECK(summary_of(out)["mode"] == mode);
    CHECK(leftovers(out) == 0);
    fs::remove_all(out);
  }
}

TEST_CASE("hostile: a pipe is detected and read whole", "[cli][hostile]") {
  // Detection once read the pipe's first megabyte and the reader the rest: 0 requests, exit 0.
  fs::path out = scratch("pipe");
  for (std::string format : {"", "--format mooncake "}) {
    auto r = shell_run("cat " + sample + " | " + binary + " replay --quiet --mode hitrate " +
                       format + "--trace /dev/stdin --out " + out.string());
    INFO(format << r.out);
    REQUIRE(r.code == 0);
    CHECK(summary_of(out)["trace"]["requests"] == 500);  // every line of the sample
    CHECK(summary_of(out)["trace"]["files"][0]["format"] == "mooncake");
  }
  fs::remove_all(out);
}

TEST_CASE("hostile: NaN, infinities and wrapped unsigned values are refused", "[cli][hostile]") {
  for (std::string args : {"replay --clock wall --speed nan", "replay --clock wall --speed inf",
                           "replay --clock wall --speed -inf", "replay --seed -1",
                           "replay --seed 18446744073709551616", "replay --check-every -1",
                           "replay --check-every 1x", "bench transfer --gib nan",
                           "bench transfer --repetitions -1", "bench replay --trace x --repeat -1"}) {
    auto r = kvtier(args);
    INFO(args << ": " << r.out);
    CHECK(r.code == 2);
    CHECK(contains(r.out, "expected"));
  }
  CHECK(contains(kvtier("replay --seed -1").out, "expected an integer from 0 to "
                                                 "18446744073709551615, got '-1'"));
  auto config = kvtier("replay --set compute.decode_token_us=1e400");
  CHECK(config.code == 2);
}

TEST_CASE("hostile: calibration files are held to the ranges of the keys they replace",
          "[cli][hostile]") {
  fs::path dir = scratch("calibration");
  fs::path slow = write_file(dir / "slow.json",
                             R"({"schema": "kvtier.calibration/1", "duplex_gbps": 100,
                                 "h2d": {"bandwidth_gbps": 1e-300, "layer_latency_us": 5},
                                 "d2h": {"bandwidth_gbps": 50, "latency_us": 10}})");
  auto r = kvtier("replay --quiet --set links.calibration=" + slow.string() + " --out " +
                  (dir / "out").string());
  CHECK(r.code == 2);
  CHECK(contains(r.out, slow.string() + ": field 'h2d.bandwidth_gbps' (it replaces "
                                        "links.h2d_gbps): expected a number in [0.001, 1e6]"));
  auto folder = kvtier("replay --quiet --set links.calibration=" + dir.string() + " --out " +
                       (dir / "out").string());
  CHECK(folder.code == 2);
  CHECK(contains(folder.out, "links.calibration: " + dir.string() +
                             ": cannot read calibration file: is a directory"));
  CHECK_FALSE(fs::exists(dir / "out"));
  fs::remove_all(dir);
}

TEST_CASE("hostile: a storage calibration's stream rates come as a pair of positive numbers",
          "[cli][hostile]") {
  fs::path dir = scratch("storage-calibration");
  std::string head = R"({"schema": "kvtier.storage_calibration/1", "read_gbps": 5,
                         "write_gbps": 3, "op_latency_us": 50, )";
  fs::path half = write_file(dir / "half.json", head + R"("stream_read_gbps": 2})");
  auto r = kvtier("replay --quiet --set storage.calibration=" + half.string() + " --out " +
                  (dir / "out").string());
  CHECK(r.code == 2);
  CHECK(contains(r.out, half.string() + ": field 'stream_write_gbps': expected a positive number"));
  fs::path zero = write_file(dir / "zero.json",
                             head + R"("stream_read_gbps": 0, "stream_write_gbps": 1})");
  r = kvtier("replay --quiet --set storage.calibration=" + zero.string() + " --out " +
             (dir / "out").string());
  CHECK(r.code == 2);
  CHECK(contains(r.out, zero.string() + ": field 'stream_read_gbps': expected a positive number"));
  CHECK_FALSE(fs::exists(dir / "out"));
  fs::path both = write_file(dir / "both.json",
                             head + R"("stream_read_gbps": 2, "stream_write_gbps": 1})");
  r = kvtier("replay --quiet --set storage.calibration=" + both.string() + " --out " +
             (dir / "out").string());
  CHECK(r.code == 0);
  fs::remove_all(dir);
}

namespace {
// What `kvtier --version` prints: the line every output names its figures by.
std::string version_line() {
  std::string v = kvtier("--version").out;
  return v.substr(0, v.find('\n'));
}
}  // namespace

TEST_CASE("cli: bench replay names the kvtier that made its figures, in its text and its JSON",
          "[cli][bench]") {
  fs::path dir = scratch("bench-replay-version");
  fs::create_directories(dir);
  const std::string version = version_line();
  REQUIRE(contains(version, "kvtier"));
  auto r = kvtier("bench replay --no-full --repeat 1 --trace " + sample + " --json " +
                  (dir / "bench.json").string());
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(contains(r.out, "kvtier: " + version + "\n"));
  json j = json::parse(slurp(dir / "bench.json"));
  CHECK(j["kvtier_version"] == version);
  CHECK(j["cache"].size() == 3);
  fs::remove_all(dir);
}

TEST_CASE("cli: bench storage's calibration carries each direction's op latency and loads",
          "[cli][storage][calibration]") {
  fs::path dir = scratch("bench-storage-calibration");
  fs::path cal = dir / "calibration.json";
  auto r = kvtier("bench storage --backends file --mib 8 --batch 4 --lone-gap-ms 1 "
                  "--set model.layers=1 --set 'storage.file_dirs=[\"" + (dir / "files").string() +
                  "\"]' --emit-calibration " + cal.string() + " --json " +
                  (dir / "bench.json").string());
  INFO(r.out);
  REQUIRE(r.code == 0);
  CHECK(contains(r.out, "hashes spread as a replay's; lone requests 21 each way, 1 ms idle"));
  json j = json::parse(slurp(cal));
  CHECK(j["schema"] == "kvtier.storage_calibration/1");
  CHECK(j["backend"] == "file");
  CHECK(j["batch"] == 4);
  CHECK(j["lone_gap_ms"] == 1.0);
  CHECK(j["block_bytes"] == 262144);
  for (const char* field : {"read_gbps", "write_gbps", "op_latency_us", "read_op_latency_us",
                            "stream_read_gbps", "stream_write_gbps"}) {
    INFO(field);
    REQUIRE(j[field].is_number());
    CHECK(j[field].get<double>() > 0);
  }
  // The latencies and stream rates are the line through the lone 4 KiB and whole-block requests:
  // a lone block costs its latency plus its bytes at the stream rate, its measured time.
  json bench = json::parse(slurp(dir / "bench.json"));
  CHECK(bench["kvtier_version"] == version_line());
  json lone = bench["backends"]["file"]["batch_path"];
  for (auto [latency, small, one, stream] :
       {std::tuple{"op_latency_us", "put_small_us", "put_one_ms", "stream_write_gbps"},
        std::tuple{"read_op_latency_us", "get_small_us", "get_one_ms", "stream_read_gbps"}}) {
    INFO(latency);
    CHECK(j[latency].get<double>() <= lone[small].get<double>());
    if (lone[one].get<double>() * 1e3 > lone[small].get<double>())  // else the noise fallback
      CHECK(j[latency].get<double>() / 1e3 + 262144 / j[stream].get<double>() / 1e6 ==
            Approx(lone[one].get<double>()).epsilon(1e-6));
  }
  auto replay = kvtier("replay --quiet --set storage.calibration=" + cal.string() + " --out " +
                       (dir / "out").string());
  INFO(replay.out);
  CHECK(replay.code == 0);
  CHECK(summary_of(dir / "out")["config"]["storage"]["calibration"] == cal.string());
  fs::remove_all(dir);
}

TEST_CASE("hostile: a tiny trace cannot claim huge memory", "[cli][hostile]") {
  fs::path dir = scratch("huge");
  fs::path azure = write_file(dir / "big.csv",
                              azure_header + "2023-11-16 18:17:03.9799600,4294967295,10\n");
  // Hit-rate mode would build its 67 million blocks: refused first, by the documented limit.
  outcome hitrate;
  double hitrate_s = seconds_of([&] {
    hitrate = kvtier("replay --quiet --mode hitrate --trace " + azure.string() + " --out " +
                     (dir / "h").string());
  });
  CHECK(hitrate.code == 2);
  CHECK(contains(hitrate.out, "big.csv:2: a request of 4294967295 input tokens covers 67108864 "
                              "cache blocks"));
  CHECK(contains(hitrate.out, "trace.max_blocks_per_request (1048576)"));
  CHECK(hitrate_s < 5);
  // Full mode rejects it (it could never fit on the device) without building its blocks.
  outcome full;
  double full_s = seconds_of([&] {
    full = kvtier("replay --quiet --trace " + azure.string() + " --out " + (dir / "f").string());
  });
  INFO(full.out);
  REQUIRE(full.code == 0);
  CHECK(full_s < 5);
  CHECK(summary_of(dir / "f")["requests"]["rejected"] == 1);
  // Lines without end: the line limit stops them, and /dev/zero cannot be detected at all.
  auto zero = kvtier("replay --quiet --mode hitrate --format mooncake --trace /dev/zero --out " +
                     (dir / "z").string());
  CHECK(zero.code == 2);
  CHECK(contains(zero.out, "/dev/zero:1: the line is longer than 16777216 bytes "
                           "(trace.max_line_bytes"));
  auto document = kvtier("replay --quiet --mode hitrate --format agentic --trace /dev/zero "
                         "--set trace.max_document_bytes=1048576 --out " + (dir / "z").string());
  CHECK(document.code == 2);
  CHECK(contains(document.out, "the document is larger than 1048576 bytes"));
  CHECK(kvtier("replay --quiet --trace /dev/zero").code == 2);
  fs::remove_all(dir);
}

TEST_CASE("hostile: range errors and kvtier config state each number key's range",
          "[cli][hostile]") {
  auto r = kvtier("replay --set trace.time_scale=0");
  CHECK(r.code == 2);
  CHECK(contains(r.out, "trace.time_scale: expected a number in [1e-6, 1e6], got 0"));
  auto config = kvtier("config");
  CHECK(config.code == 0);
  CHECK_FALSE(contains(config.out, "(a number)"));
  CHECK(contains(config.out, "storage.read_gbps (a number in [0.001, 1e6])"));
  CHECK(contains(config.out, "trace.max_line_bytes (an integer in [1024, 4294967296])"));
}

TEST_CASE("hostile: full mode counts the trace as read and rejected tokens apart",
          "[cli][hostile]") {
  fs::path dir = scratch("totals");
  fs::path trace = write_file(dir / "t.csv", azure_header + "2023-11-16 18:00:00,1000,10\n"
                                                            "2023-11-16 18:00:01,1000000,20\n"
                                                            "2023-11-16 18:00:02,2000,30\n");
  auto r = kvtier("replay --quiet --set cache.device_blocks=100 --trace " + trace.string() +
                  " --out " + (dir / "out").string());
  INFO(r.out);
  REQUIRE(r.code == 0);
  json s = summary_of(dir / "out");
  CHECK(s["trace"]["requests"] == 3);
  CHECK(s["trace"]["input_tokens"] == 1003000);
  CHECK(s["trace"]["output_tokens"] == 60);
  // 64-token blocks, only full blocks named (docs/design.md, "Hit ratio"): 1000 tokens make 15
  // (40 tokens left over), 1,000,000 make 15625, 2000 make 31 (16 left over).
  CHECK(s["trace"]["blocks"] == 15 + 15625 + 31);
  CHECK(s["requests"]["rejected"] == 1);
  CHECK(s["requests"]["rejected_input_tokens"] == 1000000);
  CHECK(s["requests"]["rejected_output_tokens"] == 20);
  CHECK(s["requests"]["finished_input_tokens"] == 3000);
  CHECK(s["requests"]["finished_blocks"] == 15 + 31);
  fs::remove_all(dir);
}

TEST_CASE("hostile: full mode reports readmission hits apart", "[cli][hostile]") {
  // A small device: requests are preempted and, admitted again, find their own blocks.
  fs::path out = scratch("readmission");
  auto r = kvtier("replay --quiet --deterministic --set cache.device_blocks=3000 "
                  "--set trace.time_scale=0.5 --out " + out.string());
  INFO(r.out);
  REQUIRE(r.code == 0);
  json s = summary_of(out);
  REQUIRE(s["preemptions"].get<int>() > 0);
  std::istringstream csv(slurp(out / "requests.csv"));
  std::string line;
  std::getline(csv, line);
  CHECK(contains(line, ",preemptions,first_hit_blocks,first_hit_tokens"));
  uint64_t first = 0, readmitted = 0, readmission_blocks = 0;
  while (std::getline(csv, line)) {
    std::vector<uint64_t> v;
    std::istringstream cells(line);
    for (std::string cell; std::getline(cells, cell, ',');)
      v.push_back(cell.empty() ? 0 : static_cast<uint64_t>(std::stod(cell)));
    REQUIRE(v.size() == 21);
    first += v[19];
    if (v[18] > 0) {
      ++readmitted;
      readmission_blocks += v[11] + v[12] + v[13];  // hits at the last admission
    }
  }
  const json& h = s["hits"]["blocks"];
  uint64_t hits = h["device"].get<uint64_t>() + h["host"].get<uint64_t>() +
                  h["storage"].get<uint64_t>();
  CHECK(hits == first);
  CHECK(s["readmission_hits"]["requests"] == readmitted);
  CHECK(s["readmission_hits"]["blocks"] == readmission_blocks);
  CHECK(readmission_blocks > hits);  // a preempted request finds most of itself again
  CHECK(s["hit_ratio"]["blocks"].get<double>() ==
        Approx(double(hits) / s["requests"]["finished_blocks"].get<double>()).margin(1e-6));
  fs::remove_all(out);
}

TEST_CASE("hostile: output folders are left clean", "[cli][hostile]") {
  fs::path base = scratch("hygiene");
  SECTION("a bad trace leaves no new folder, in either mode") {
    for (std::string mode : {"hitrate", "full"}) {
      fs::path out = base / "new" / mode;
      auto r = kvtier("replay --quiet --mode " + mode + " --trace " + data +
                      "/bad_line.jsonl --out " + out.string());
      CHECK(r.code == 2);
      CHECK_FALSE(fs::exists(base / "new"));
    }
  }
  SECTION("full mode checks --out before the replay") {
    write_file(base / "file", "x");
    // The trace's line 2 is bad: found only during the replay, so --out is reported first.
    auto r = kvtier("replay --quiet --trace " + data + "/bad_line.jsonl --out " +
                    (base / "file" / "out").string());
    CHECK(r.code == 2);
    CHECK(contains(r.out, "--out: "));
    CHECK_FALSE(contains(r.out, "bad_line.jsonl:2"));
  }
  SECTION("temporaries of a killed run are removed by the next") {
    pid_t gone = fork();
    if (gone == 0)
      _exit(0);
    waitpid(gone, nullptr, 0);
    write_file(base / ("requests.csv.tmp." + std::to_string(gone)), "stale");
    write_file(base / ("summary.json.old." + std::to_string(gone)), "stale");
    write_file(base / "notes.tmp.1", "not ours");
    auto r = kvtier("replay --quiet --mode hitrate --out " + base.string());
    CHECK(r.code == 0);
    CHECK(leftovers(base) == 1);
    CHECK(fs::exists(base / "notes.tmp.1"));
  }
  SECTION("--out '' is refused by name") {
    auto r = kvtier("replay --out ''");
    CHECK(r.code == 2);
    CHECK(contains(r.out, "--out: expected a directory name"));
  }
  fs::remove_all(base);
}

TEST_CASE("hostile: SIGINT and SIGTERM remove the run's temporaries", "[cli][hostile]") {
  for (int sig : {SIGINT, SIGTERM}) {
    fs::path base = scratch("signal-" + std::to_string(sig));
    fs::create_directories(base);
    fs::path fifo = base / "trace.fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    fs::path out = base / "new" / "out";
    pid_t child = fork();
    if (child == 0) {
      std::signal(SIGINT, SIG_DFL);
      std::signal(SIGTERM, SIG_DFL);
      int null = ::open("/dev/null", O_WRONLY);
      dup2(null, 1);
      dup2(null, 2);
      execl(binary.c_str(), "kvtier", "replay", "--quiet", "--mode", "hitrate", "--format",
            "mooncake", "--trace", fifo.c_str(), "--out", out.c_str(), nullptr);
      _exit(127);
    }
    // A few requests, then silence: the replay waits for more with its outputs open. The FIFO
    // is opened without blocking, so that a child that never started cannot hang the test.
    int fd = -1;
    for (int i = 0; i < 500 && fd < 0; ++i) {
      fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd < 0)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (fd < 0) {
      ::kill(child, SIGKILL);
      waitpid(child, nullptr, 0);
      FAIL("kvtier never opened the FIFO");
    }
    // More than the reader's 1 MiB chunk, so that it has requests to replay whatever it buffers.
    ::fcntl(fd, F_SETFL, 0);
    std::string lines;
    for (int i = 0; lines.size() < (size_t{3} << 19); ++i)
      lines += R"({"timestamp": )" + std::to_string(i) +
               R"(, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]})" "\n";
    CHECK(::write(fd, lines.data(), lines.size()) == static_cast<ssize_t>(lines.size()));
    fs::path temp = out / ("requests.csv.tmp." + std::to_string(child));
    for (int i = 0; i < 500 && !fs::exists(temp); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    CHECK(fs::exists(temp));
    ::kill(child, sig);
    int status = 0;
    waitpid(child, &status, 0);
    ::close(fd);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == sig);
    CHECK_FALSE(fs::exists(base / "new"));  // temporaries gone, then the empty new folders
    fs::remove_all(base);
  }
}

TEST_CASE("hostile: options the chosen mode ignores are refused", "[cli][hostile]") {
  for (std::string args : {"--mode hitrate --clock wall", "--mode hitrate --speed 2",
                           "--speed 2", "--clock virtual --speed 2"}) {
    auto r = kvtier("replay --quiet " + args);
    INFO(args << ": " << r.out);
    CHECK(r.code == 2);
  }
  CHECK(contains(kvtier("replay --speed 2").out, "--speed: sets the pace of the wall clock: it "
                                                 "needs --clock wall"));
  CHECK(contains(kvtier("replay --mode hitrate --clock wall").out,
                 "--mode hitrate replays without a clock"));
}

TEST_CASE("hostile: a config file with a key twice is refused", "[cli][hostile]") {
  fs::path dir = scratch("twice");
  fs::path config = write_file(dir / "c.json", R"({"cache": {"block_size": 16, "block_size": 512}})");
  auto r = kvtier("replay --config " + config.string());
  CHECK(r.code == 2);
  CHECK(contains(r.out, config.string() + ": key 'cache.block_size' appears twice"));
  fs::remove_all(dir);
}

// Limits named in a person's terms: a pace beyond --speed's top is written as given (not its 309
// digits), and a line longer than the process may hold under `ulimit -v` is refused naming the
// limit, not ended by std::bad_alloc (the check read free memory only). Under a second each.
TEST_CASE("hostile: --speed 1e308 and a trace line under ulimit -v are refused in words",
          "[cli][hostile]") {
  auto speed = kvtier("replay --clock wall --speed 1e308");
  CHECK(speed.code == 2);
  CHECK(contains(speed.out, "(1e+308 given)"));
  CHECK_FALSE(contains(speed.out, "0000000000"));
  fs::path dir = scratch("ulimit");
  auto limited = shell_run("ulimit -v 1000000; " + binary +
                           " replay --quiet --mode hitrate --format mooncake --trace /dev/zero"
                           " --set trace.max_line_bytes=4294967296 --out " + (dir / "z").string());
  INFO(limited.out);
  CHECK(limited.code == 2);
  CHECK(contains(limited.out, "/dev/zero:1: the line is longer than"));
  CHECK(contains(limited.out, "under its ulimit -v (RLIMIT_AS)"));
  CHECK_FALSE(contains(limited.out, "bad_alloc"));
  fs::remove_all(dir);
}
