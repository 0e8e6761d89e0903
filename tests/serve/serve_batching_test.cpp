// kvtier serve answering calls sent together, and kvtier bench serve counting them
// (serve_test.cpp says how each test runs its server).

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "tests/serve/serve_calls.hpp"
#include "tests/serve/serve_process.hpp"

namespace fs = std::filesystem;
using namespace kvtier;
using namespace kvtier::serve;
using namespace kvtier::test::serve_calls;
using kvtier::test::serve_process;

TEST_CASE("calls sent together are each answered once, however the server batches them",
          "[serve]") {
  // More calls than the socket thread reads in one wake-up (256), from two clients at once,
  // good and bad mixed: each comes back once, with its own id and its own answer.
  serve_process s(small({"--set", "serve.max_message_bytes=4096"}));
  client a(s.endpoint()), b(s.endpoint());
  hello(a);
  hello(b);
  std::map<uint64_t, std::string> want_a, want_b;
  for (int i = 0; i < 300; ++i) {
    client& c = i % 2 ? b : a;
    auto& want = i % 2 ? want_b : want_a;
    switch (i % 5) {
      case 0: want[c.send("ping", 0)] = "ping"; break;
      case 1:
        want[c.send("lookup", 1, [&](map_writer& w) { w.put("tokens", prompt(128, i)); })] =
          "lookup";
        break;
      case 2: want[c.send("fly", 0)] = "unknown_op"; break;
      case 3:
        want[c.send("wait", 1, [&](map_writer& w) { w.put("req", 1000 + i); })] = "bad_request";
        break;
      default:
        want[c.send("lookup", 1, [&](map_writer& w) { w.put("tokens", prompt(2000, i)); })] =
          "too_large";
    }
  }
  auto collect = [](client& c, std::map<uint64_t, std::string>& want) {
    size_t expected = want.size();
    for (size_t got = 0; got < expected; ++got) {
      std::optional<reply> r = c.next(std::chrono::seconds(20));
      REQUIRE(r);
      uint64_t id = r->u64("id");
      bool ok = r->flag("ok");
      // too_large replies are not decoded, so they carry id 0: matched by kind
      std::string kind = ok ? (r->find("device_blocks") ? "lookup" : "ping") : r->str("error");
      auto it = kind == "too_large"
                  ? std::find_if(want.begin(), want.end(),
                                 [](const auto& w) { return w.second == "too_large"; })
                  : want.find(id);
      REQUIRE(it != want.end());
      CHECK(it->second == kind);
      want.erase(it);
    }
    CHECK(want.empty());
  };
  collect(a, want_a);
  collect(b, want_b);
  reply st = a.call("stats");
  CHECK(stat_of(st, "errors", "too_large") == 60);
  CHECK(stat_of(st, "errors", "unknown_op") == 60);
  CHECK(stat_of(st, "errors", "bad_request") == 60);
  CHECK(s.stop() == 0);
}

TEST_CASE("kvtier bench serve counts messages and the verb calls they carry apart", "[serve]") {
  serve_process s({"--speed", "1000", "--set", "cache.storage_write=never"});
  fs::path out = fs::temp_directory_path() / ("kvtier-bench-serve-" + std::to_string(::getpid()));
  fs::create_directories(out);
  int echo_port = kvtier::test::free_loopback_port();
  std::string cmd = std::string(KVTIER_BINARY) + " bench serve --connect " + s.endpoint() +
                    " --echo-port " + std::to_string(echo_port) + " --trace " +
                    KVTIER_SOURCE_DIR + "/traces/mooncake_conversation_sample.jsonl" +
                    " --clients 2 --requests-per-step 4 --seconds 0.5 --set "
                    "cache.storage_write=never --json " + (out / "serve.json").string() +
                    " > /dev/null 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::ifstream in(out / "serve.json");
  nlohmann::json j = nlohmann::json::parse(in);
  auto count = [&](const char* row) {
    return j["rows"].contains(row) ? j["rows"][row]["count"].get<uint64_t>() : uint64_t{0};
  };
  uint64_t lookups = count("lookup"), allocates = count("allocate"), waits = count("wait"),
           steps = count("step");
  // Each round of an engine: 4 lookups, 4 allocations, a wait per pending one, then a step
  // admitting the 4 and a step computing the admitted ones and finishing the 4.
  REQUIRE(lookups > 0);
  CHECK(lookups % 4 == 0);
  CHECK(allocates == lookups);
  CHECK(steps == lookups / 2);
  CHECK(waits <= allocates);
  CHECK(j["messages"].get<uint64_t>() == lookups + allocates + waits + steps);
  uint64_t rounds = lookups / 4;
  uint64_t verbs = j["verb_calls"].get<uint64_t>();
  uint64_t floor = lookups + allocates + waits + 8 * rounds;  // admits and finishes
  CHECK(verbs >= floor);
  CHECK(verbs <= floor + 4 * rounds);                          // computed: the admitted ones
  CHECK(count("verbs") == verbs);
  CHECK(j["echo_messages_per_s"].get<double>() > 0);
  CHECK(j["ratio_to_echo"].get<double>() > 0);
  fs::remove_all(out);
  CHECK(s.stop() == 0);
}
