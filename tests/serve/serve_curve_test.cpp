// kvtier serve's transport security (docs/protocol.md, "Encryption"): ZeroMQ CURVE with keys from
// files, the client stub and engine-sim over it; a plaintext client, a wrong server key and an
// unlisted client key refused at the handshake and counted; a non-loopback bind without a CURVE
// key refused at start; no secret printed. Also the stats it keeps honest: a malformed, unknown
// or too-large frame is counted as its error, not as a ping; and `tokens: "abc"` told it must be
// a list. (About 10 s, most of it engine-sim's short replay and the refused clients' timeouts.)

#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include <zmq.h>

#include "serve/client/client.hpp"
#include "serve/wire/call.hpp"
#include "serve/wire/curve.hpp"
#include "serve/wire/error_reply.hpp"
#include "serve/wire/stats_reply.hpp"
#include "tests/serve/serve_process.hpp"

namespace fs = std::filesystem;
using kvtier::test::serve_process;
using namespace kvtier::serve;

namespace {

constexpr const char* token = "tok-61c0-never-printed";

struct key_pair {
  std::string pub, sec;
  key_pair() {
    char p[41], s[41];
    REQUIRE(zmq_curve_keypair(p, s) == 0);
    pub = p;
    sec = s;
  }
};

struct key_files {
  fs::path dir;
  key_pair server, listed;
  key_files() {
    dir = fs::temp_directory_path() / ("kvtier-curve-" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::ofstream(dir / "server.key") << server.sec << "\n";
    std::ofstream(dir / "server.pub") << server.pub << "\n";
    std::ofstream(dir / "engine.key") << listed.sec << "\n";
    std::ofstream(dir / "clients") << "# admitted\n" << listed.pub << "\n";
  }
  ~key_files() { fs::remove_all(dir); }
  std::string path(const char* name) const { return (dir / name).string(); }
};

int run(const std::string& command, std::string* out = nullptr) {
  std::string cmd = command + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  REQUIRE(p);
  char buf[4096];
  size_t n;
  std::string text;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0)
    text.append(buf, n);
  int status = ::pclose(p);
  if (out)
    *out = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Whether a ping from `c` gets an answer within its timeout.
bool answered(client& c) {
  try {
    call ping;
    ping.op = verb::ping;
    c.call(ping);
    return true;
  } catch (const remote_error&) {
    return true;  // an answer, if a refusal
  } catch (const std::runtime_error&) {
    return false;
  }
}

stats_answer stats_of(client& c) {
  call ask;
  ask.op = verb::stats;
  return decode_stats_reply(c.call(ask).root());
}

}  // namespace

TEST_CASE("serve over CURVE: encrypted calls work, strangers are refused and counted",
          "[serve][curve]") {
  key_files keys;
  serve_process s({"--token", token, "--curve-key-file", keys.path("server.key"),
                   "--curve-clients-file", keys.path("clients"), "--set",
                   "cache.device_tokens=4096"});
  curve_client_keys good = read_curve_client_keys(keys.path("server.pub"),
                                                  keys.path("engine.key"), "server", "client");
  client c(s.endpoint(), token, std::chrono::seconds(10), good);
  REQUIRE(answered(c));
  using namespace std::chrono_literals;
  client plaintext(s.endpoint(), token, 1500ms);
  CHECK_FALSE(answered(plaintext));
  curve_client_keys elsewhere{key_pair().pub, "", ""};  // another server's key
  client lost(s.endpoint(), token, 1500ms, elsewhere);
  CHECK_FALSE(answered(lost));
  curve_client_keys unlisted{keys.server.pub, "", ""};  // a fresh pair, not on the list
  client stranger(s.endpoint(), token, 1500ms, unlisted);
  CHECK_FALSE(answered(stranger));
  stats_answer st = stats_of(c);
  CHECK(st.refused_connections >= 3);
  // Where nothing listens, the client says that no handshake completed.
  client nobody("tcp://127.0.0.1:" + std::to_string(kvtier::test::free_loopback_port()), token,
                500ms);
  call ping;
  ping.op = verb::ping;
  CHECK_THROWS_WITH(nobody.call(ping), Catch::Contains("no handshake with it completed"));
  // The token still decides, over CURVE: a wrong one is answered unauthorized and counted.
  client wrong(s.endpoint(), "not-the-token", std::chrono::seconds(10), good);
  CHECK_THROWS_WITH(wrong.call(ping), Catch::Contains("unauthorized"));
  CHECK(stats_of(c).errors[static_cast<int>(error_kind::unauthorized)] >= 1);
  CHECK(s.stop() == 0);
  const std::string& out = s.output();
  CHECK(out.find(keys.server.pub) != std::string::npos);  // clients need it: printed
  CHECK(out.find(keys.server.sec) == std::string::npos);
  CHECK(out.find(keys.listed.sec) == std::string::npos);
  CHECK(out.find(token) == std::string::npos);
}

TEST_CASE("engine-sim replays through a CURVE server", "[serve][curve][engine-sim]") {
  key_files keys;
  serve_process s({"--token", token, "--curve-key-file", keys.path("server.key"), "--speed",
                   "60", "--set", "storage.capacity_tokens=0"});
  fs::path trace = keys.dir / "trace.jsonl";
  {
    std::ifstream in(std::string(KVTIER_SOURCE_DIR) + "/traces/mooncake_conversation_sample.jsonl");
    std::ofstream out(trace);
    std::string line;
    for (int i = 0; i < 40 && std::getline(in, line); ++i)
      out << line << '\n';
  }
  std::string bin = KVTIER_BINARY;
  std::string out;
  std::string sim = bin + " engine-sim --quiet --connect " + s.endpoint() + " --token " + token +
                    " --trace " + trace.string() +
                    " --set trace.time_scale=8 --set storage.capacity_tokens=0 --speed 60";
  CHECK(run(sim + " --curve-server-key-file " + keys.path("server.pub") + " --out " +
              (keys.dir / "sim").string(),
            &out) == 0);
  INFO(out);
  CHECK(fs::exists(keys.dir / "sim" / "summary.json"));
  // No secret in anything engine-sim wrote or printed.
  for (const auto& f : fs::recursive_directory_iterator(keys.dir / "sim")) {
    if (!f.is_regular_file())
      continue;
    std::ifstream in(f.path());
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    INFO(f.path());
    CHECK(text.find(token) == std::string::npos);
    CHECK(text.find(keys.server.sec) == std::string::npos);
  }
  CHECK(out.find(token) == std::string::npos);
  // Without the server's key engine-sim cannot reach it: it says why and fails.
  CHECK(run(sim + " --out " + (keys.dir / "plain").string(), &out) != 0);
  CHECK_THAT(out, Catch::Contains("refused this connection's handshake") &&
                    Catch::Contains("--curve-server-key-file"));
  // With another server's key: no handshake completes, and it says so.
  std::ofstream(keys.dir / "other.pub") << key_pair().pub << "\n";
  CHECK(run(sim + " --curve-server-key-file " + keys.path("other.pub") + " --out " +
              (keys.dir / "other").string(),
            &out) != 0);
  CHECK_THAT(out, Catch::Contains("refused this connection's handshake") &&
                    Catch::Contains("not its own"));
  CHECK(out.find(token) == std::string::npos);
  CHECK(s.stop() == 0);
  CHECK(s.output().find(token) == std::string::npos);
}

TEST_CASE("serve refuses plaintext off loopback, and names bad key files", "[serve][curve]") {
  key_files keys;
  std::string bin = KVTIER_BINARY;
  std::string out;
  std::string bind = " --bind tcp://0.0.0.0:" + std::to_string(kvtier::test::free_loopback_port());
  CHECK(run(bin + " serve" + bind + " --token " + token, &out) == 2);
  CHECK(out.find("--curve-key-file") != std::string::npos);
  CHECK(out.find(token) == std::string::npos);
  std::ofstream(keys.dir / "junk.key") << "not a key\n";
  CHECK(run(bin + " serve --curve-key-file " + keys.path("junk.key"), &out) == 2);
  CHECK(out.find("junk.key' does not start with a CURVE key") != std::string::npos);
  // engine-sim will not send its token in clear to another machine either.
  CHECK(run(bin + " engine-sim --connect tcp://192.0.2.1:5557 --token " + token, &out) == 2);
  CHECK_THAT(out, Catch::Contains("give --curve-server-key-file"));
  CHECK(out.find(token) == std::string::npos);
}

TEST_CASE("stats count a malformed, unknown or oversized frame as its error, not as a ping",
          "[serve][stats]") {
  serve_process s({"--set", "serve.max_message_bytes=65536"});
  client c(s.endpoint());
  for (int i = 0; i < 2; ++i) {
    call ping;
    ping.op = verb::ping;
    c.call(ping);
  }
  // Each is answered with an error (the raw frames name no call id: their replies carry 0).
  auto error_of = [&](uint64_t id) {
    std::optional<refusal_answer> e = decode_error(c.receive(id).root());
    REQUIRE(e);
    return *e;
  };
  c.send_raw("\xc1 not msgpack");
  CHECK(error_of(0).kind == "malformed");
  CHECK(error_of(c.send("no_such_verb", 0)).kind == "unknown_op");
  c.send_raw(std::string(70000, 'x'));
  CHECK(error_of(0).kind == "too_large");
  // A known verb with a wrong field counts under that verb; the message says what it must be.
  refusal_answer tokens = error_of(c.send("lookup", 1, [](map_writer& w) {
    w.put_str("tokens", "abc");
  }));
  CHECK(tokens.message.find("'tokens' must be a list of token ids") != std::string::npos);
  stats_answer st = stats_of(c);
  CHECK(st.calls[static_cast<int>(verb::ping)] == 2);
  CHECK(st.calls[static_cast<int>(verb::lookup)] == 1);
  CHECK(st.errors[static_cast<int>(error_kind::malformed)] == 2);
  CHECK(st.errors[static_cast<int>(error_kind::unknown_op)] == 1);
  CHECK(st.errors[static_cast<int>(error_kind::too_large)] == 1);
}

TEST_CASE("same_secret: equal only when equal, whatever the lengths", "[serve][curve]") {
  CHECK(same_secret("s3cret", "s3cret"));
  CHECK(same_secret("", ""));
  CHECK_FALSE(same_secret("s3cre", "s3cret"));     // a prefix
  CHECK_FALSE(same_secret("s3cretX", "s3cret"));   // longer
  CHECK_FALSE(same_secret("", "s3cret"));
  CHECK_FALSE(same_secret("s3cret", ""));
  CHECK_FALSE(same_secret("t3cret", "s3cret"));    // first byte
  CHECK_FALSE(same_secret("s3creu", "s3cret"));    // last byte
  CHECK_FALSE(same_secret(std::string_view("s3cret\0", 7), "s3cret"));  // a trailing NUL
  // On random pairs it agrees with ==.
  std::mt19937 rng(40);
  for (int i = 0; i < 2000; ++i) {
    auto text = [&] {
      std::string t(rng() % 4, '\0');
      for (char& c : t)
        c = static_cast<char>('a' + rng() % 2);
      return t;
    };
    std::string a = text(), b = text();
    INFO(a << " / " << b);
    CHECK(same_secret(a, b) == (a == b));
  }
}
