// A secured Redis (docs/design.md "Secured Redis"): a password (requirepass), an ACL user, TLS
// with the server's certificate checked (and a client certificate where the server asks for one),
// on real redis-servers on loopback. A wrong password, a wrong CA and a missing client certificate
// are refused at start with exit 2 and a message naming the node and the refusal; a password
// changed under a running pool is counted; and the password appears in no output: not stdout,
// stderr, summary.json or requests.csv, whether it came from a file or the environment.
// (About 10 s: certificates are EC keys, made in a fraction of a second.)

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <catch2/catch.hpp>

#include "storage/payload_pattern.hpp"
#include "storage/redis_backend.hpp"
#include "storage/redis_cluster_backend.hpp"
#include "tests/storage/backend_calls.hpp"
#include "tests/storage/redis_cluster_servers.hpp"
#include "tests/storage/redis_server.hpp"

using namespace kvtier;
using namespace kvtier::test;
namespace fs = std::filesystem;

namespace {

constexpr const char* password = "pw-7c1f0e93-do-not-print";

struct secrets_dir {
  fs::path path;
  secrets_dir() {
    std::string t = (fs::temp_directory_path() / "kvtier-secure-XXXXXX").string();
    path = ::mkdtemp(t.data());
  }
  ~secrets_dir() { fs::remove_all(path); }
};

backend_options redis_options(const std::string& address) {
  backend_options o;
  o.kind = storage_backend_kind::redis;
  o.ns = {"test-model", "bf16"};
  o.nodes = 1;
  o.redis = {address};
  return o;
}

// One block stored and read back whole.
void round_trip_one(storage_backend& b, uint64_t hash) {
  block_ref blk{1, hash};
  REQUIRE(put_now(b, {blk}, {pattern_payload(hash, 8192)}) == std::vector<bool>{true});
  auto got = get_now(b, {blk}, 8192);
  REQUIRE(got[0].has_value());
  CHECK(check_pattern_payload(hash, 8192, *got[0]) == "");
}

std::string thrown_by(const backend_options& o) {
  try {
    redis_backend r(o);
  } catch (const std::invalid_argument& e) {
    return std::string("invalid_argument: ") + e.what();
  } catch (const std::exception& e) {
    return std::string("other: ") + e.what();
  }
  return "nothing thrown";
}

int run(const std::string& command) {
  int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A test CA, a server certificate for 127.0.0.1 and a client certificate it signed, and a second
// CA that signed nothing here.
struct certificates {
  fs::path dir;
  explicit certificates(const fs::path& d) : dir(d) {
    std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    std::string at = "cd " + dir.string() + " && ";
    auto make_ca = [&](const std::string& name) {
      REQUIRE(run(at + "openssl req -x509" + ec + " -days 2 -subj /CN=" + name + " -keyout " +
                  name + ".key -out " + name + ".crt >/dev/null 2>&1") == 0);
    };
    auto make_cert = [&](const std::string& name, const std::string& ext) {
      REQUIRE(run(at + "openssl req" + ec + " -subj /CN=" + name + " -keyout " + name +
                  ".key -out " + name + ".csr >/dev/null 2>&1") == 0);
      std::ofstream(dir / (name + ".ext")) << ext << "\n";
      REQUIRE(run(at + "openssl x509 -req -in " + name + ".csr -CA ca.crt -CAkey ca.key "
                  "-CAcreateserial -days 2 -extfile " + name + ".ext -out " + name +
                  ".crt >/dev/null 2>&1") == 0);
    };
    make_ca("ca");
    make_ca("other-ca");
    make_cert("server", "subjectAltName=IP:127.0.0.1,DNS:localhost");
    make_cert("client", "extendedKeyUsage=clientAuth");
  }
  std::string file(const std::string& name) const { return (dir / name).string(); }
};

// A redis-server answering TLS on a port of its own (and plain text on its usual one, for the
// test's own commands); `clients`: its tls-auth-clients (yes: a client certificate is required).
struct tls_server {
  int tls_port;
  redis_server server;
  tls_server(const certificates& c, const std::string& clients, const std::string& pw = {})
    : tls_port(free_loopback_port()),
      server("64mb",
             {"--tls-port", std::to_string(tls_port), "--tls-cert-file", c.file("server.crt"),
              "--tls-key-file", c.file("server.key"), "--tls-ca-cert-file", c.file("ca.crt"),
              "--tls-auth-clients", clients},
             "/tmp", 0, pw) {}
  std::string tls_address() const { return "127.0.0.1:" + std::to_string(tls_port); }
};

}  // namespace

TEST_CASE("redis with a password: AUTH before anything else, and a wrong one refused by name",
          "[storage][redis][secure]") {
  redis_server a("64mb", {}, "/tmp", 0, password);
  backend_options o = redis_options(a.address());
  // Without credentials the server refuses every command: a setting to fix, named.
  std::string none = thrown_by(o);
  CHECK(none.rfind("invalid_argument", 0) == 0);
  CHECK(none.find("NOAUTH") != std::string::npos);
  o.redis_auth.password = "wrong-password";
  std::string wrong = thrown_by(o);
  INFO(wrong);
  CHECK(wrong.rfind("invalid_argument: storage.redis: cannot use " + a.address(), 0) == 0);
  CHECK(wrong.find("WRONGPASS") != std::string::npos);
  CHECK(wrong.find("wrong-password") == std::string::npos);
  o.redis_auth.password = password;
  redis_backend r(o);
  round_trip_one(r, 0x51);
  CHECK(listing_now(r).blocks == std::vector<uint64_t>{0x51});  // listings authenticate too
  CHECK(r.counters().auth_failures == 0);
  // The password changes under the running pool: its reconnects are refused and counted, its
  // puts fail (the node is down to it); with the password back, it serves again.
  redisContext* admin = redisConnect("127.0.0.1", a.port());
  REQUIRE(admin);
  freeReplyObject(redisCommand(admin, "AUTH %s", password));
  freeReplyObject(redisCommand(admin, "CONFIG SET requirepass rotated-password"));
  freeReplyObject(redisCommand(admin, "CLIENT KILL TYPE normal SKIPME yes"));
  redisFree(admin);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (r.counters().auth_failures == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(r.counters().auth_failures >= 1);
  CHECK_FALSE(r.node_up(0));
  CHECK(put_now(r, {{1, 0x52}}, {pattern_payload(0x52, 8192)}) == std::vector<bool>{false});
  redisContext* c = redisConnect("127.0.0.1", a.port());
  REQUIRE(c);
  freeReplyObject(redisCommand(c, "AUTH rotated-password"));
  freeReplyObject(redisCommand(c, "CONFIG SET requirepass %s", password));
  redisFree(c);
  deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!r.node_up(0) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(r.node_up(0));
  round_trip_one(r, 0x53);
}

TEST_CASE("redis with an ACL user: AUTH user password, and only that user's keys",
          "[storage][redis][secure]") {
  redis_server a("64mb", {}, "/tmp", 0, password);
  REQUIRE(a.command({"ACL", "SETUSER", "kvtier-pool", "on", ">acl-pw-19b2", "~kvtier:*",
                     "+@all"}) == "OK");
  backend_options o = redis_options(a.address());
  o.redis_auth.user = "kvtier-pool";
  o.redis_auth.password = "not-it";
  std::string wrong = thrown_by(o);
  CHECK(wrong.find("WRONGPASS") != std::string::npos);
  CHECK(wrong.find("user 'kvtier-pool'") != std::string::npos);
  CHECK(wrong.find("not-it") == std::string::npos);
  o.redis_auth.password = "acl-pw-19b2";
  redis_backend r(o);
  round_trip_one(r, 0x61);
}

TEST_CASE("redis cluster with a password: routers, listings and the failover wait's CONFIG GET "
          "authenticate", "[storage][redis][cluster][secure]") {
  redis_cluster_servers cluster(3, 0, "64mb", 1000, password);
  backend_options o;
  o.kind = storage_backend_kind::redis_cluster;
  o.ns = {"test-model", "bf16"};
  o.nodes = 1;
  o.redis_cluster = {cluster.seeds()[0]};
  o.redis_auth.password = "wrong-password";
  try {
    redis_cluster_backend r(o);
    FAIL("a wrong password was accepted");
  } catch (const std::invalid_argument& e) {
    std::string what = e.what();
    INFO(what);
    CHECK(what.find("WRONGPASS") != std::string::npos);
    CHECK(what.find("wrong-password") == std::string::npos);
  }
  o.redis_auth.password = password;
  redis_cluster_backend r(o);
  round_trip_one(r, 0x71);
  CHECK(listing_now(r).blocks == std::vector<uint64_t>{0x71});
  CHECK(listing_now(r).complete());
  // It read the cluster's own cluster-node-timeout (1 s here): twice that and 5 s.
  CHECK(r.failover_wait_ns() == redis_cluster_backend::failover_wait_for(1000));
  CHECK(r.start_note().find("7 s") != std::string::npos);
}

TEST_CASE("redis over TLS: the server's certificate checked, a client certificate where asked",
          "[storage][redis][secure][tls]") {
  secrets_dir dir;
  certificates certs(dir.path);
  tls_server plain_clients(certs, "no", password);
  backend_options o = redis_options(plain_clients.tls_address());
  o.redis_auth.password = password;
  o.redis_auth.tls.enabled = true;
  o.redis_auth.tls.ca_file = certs.file("ca.crt");
  {
    redis_backend r(o);
    round_trip_one(r, 0x81);
    CHECK(listing_now(r).blocks == std::vector<uint64_t>{0x81});
    CHECK(r.counters().tls_failures == 0);
  }
  // A CA that did not sign the server's certificate: refused at start, saying why.
  backend_options other = o;
  other.redis_auth.tls.ca_file = certs.file("other-ca.crt");
  std::string refused = thrown_by(other);
  INFO(refused);
  CHECK(refused.rfind("invalid_argument", 0) == 0);
  CHECK(refused.find("certificate verify failed") != std::string::npos);
  // A name the certificate does not carry.
  backend_options named = o;
  named.redis_auth.tls.server_name = "redis.example.org";
  CHECK(thrown_by(named).find("certificate verify failed") != std::string::npos);
  // Plain text to the TLS port is not a connection.
  backend_options plain = o;
  plain.redis_auth.tls = {};
  CHECK(thrown_by(plain).find("cannot") != std::string::npos);
  // A server that wants a client certificate.
  tls_server strict(certs, "yes");
  backend_options anonymous = redis_options(strict.tls_address());
  anonymous.redis_auth.tls.enabled = true;
  anonymous.redis_auth.tls.ca_file = certs.file("ca.crt");
  CHECK(thrown_by(anonymous).rfind("nothing thrown", 0) != 0);
  anonymous.redis_auth.tls.cert_file = certs.file("client.crt");
  anonymous.redis_auth.tls.key_file = certs.file("client.key");
  redis_backend r(anonymous);
  round_trip_one(r, 0x82);
  // Files that cannot be used are named by their key.
  backend_options missing = anonymous;
  missing.redis_auth.tls.ca_file = (dir.path / "absent.crt").string();
  CHECK(thrown_by(missing).find("storage.redis_tls_ca_file") != std::string::npos);
}

#ifdef KVTIER_BINARY
// The command line as a user runs it: the password from a file or the environment, never echoed.
TEST_CASE("kvtier replay against a secured redis: no secret in any output",
          "[storage][redis][secure][cli]") {
  secrets_dir dir;
  redis_server a("64mb", {}, "/tmp", 0, password);
  fs::path trace = dir.path / "trace.jsonl";
  {
    std::ofstream out(trace);
    for (int k = 0; k < 40; ++k)
      out << "{\"timestamp\": " << k * 50 << ", \"input_length\": 1024, \"output_length\": 2, "
          << "\"hash_ids\": [" << k % 5 << ", " << 10 + k % 5 << "]}\n";
  }
  fs::path pw_file = dir.path / "redis.pw";
  std::ofstream(pw_file) << password << "\n";
  std::string base = std::string(KVTIER_BINARY) + " replay --clock wall --speed 20 --trace " +
                     trace.string() +
                     " --set cache.device_tokens=2048 --set cache.host_tokens=2048"
                     " --set storage.capacity_blocks=64 --set storage.payload_bytes=4096"
                     " --set storage.backend=redis --set 'storage.redis=[\"" +
                     a.address() + "\"]'";
  auto everything = [&](const std::string& command, const fs::path& out, int& code) {
    std::string log = (dir.path / "log.txt").string();
    code = run(command + " --out " + out.string() + " >" + log + " 2>&1");
    std::ifstream in(log);
    std::stringstream all;
    all << in.rdbuf();
    for (const char* f : {"summary.json", "requests.csv"})
      if (fs::exists(out / f))
        all << std::ifstream(out / f).rdbuf();
    return all.str();
  };
  int code = 0;
  std::string seen = everything(base + " --set storage.redis_password_file=" + pw_file.string(),
                                dir.path / "from-file", code);
  CHECK(code == 0);
  CHECK(seen.find(password) == std::string::npos);
  CHECK(seen.find("\"redis_password_file\"") != std::string::npos);  // the path is echoed
  seen = everything("KVTIER_REDIS_PASSWORD=" + std::string(password) + " " + base,
                    dir.path / "from-env", code);
  CHECK(code == 0);
  CHECK(seen.find(password) == std::string::npos);
  CHECK(seen.find("\"payload_errors\": 0") != std::string::npos);
  seen = everything("KVTIER_REDIS_PASSWORD=almost-" + std::string(password) + " " + base,
                    dir.path / "wrong", code);
  CHECK(code == 2);
  CHECK(seen.find("WRONGPASS") != std::string::npos);
  CHECK(seen.find(password) == std::string::npos);
  // A password on the command line is refused without being repeated.
  seen = everything(base + " --set storage.redis_password=" + password, dir.path / "cli", code);
  CHECK(code == 2);
  CHECK(seen.find("storage.redis_password_file") != std::string::npos);
  CHECK(seen.find(password) == std::string::npos);
}
#endif
