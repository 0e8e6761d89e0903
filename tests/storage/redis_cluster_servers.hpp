#pragma once

// A Redis Cluster of the test's own on loopback ports: `masters` redis-servers in cluster mode
// (each with `replicas` replicas), joined with `redis-cli --cluster create`, ready once every node
// says cluster_state:ok. Node config files live in a temporary directory; every server is killed
// in the destructor. kill_master() SIGKILLs one master (a crash; its replica, if any, takes over).

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tests/storage/redis_server.hpp"

namespace kvtier::test {

/// A free port whose cluster bus port (10000 above it) is free too.
inline int free_cluster_port() {
  for (int tries = 0; tries < 1000; ++tries) {
    int port = free_loopback_port();
    if (port + 10000 > 65535)
      continue;
    try {
      free_loopback_port(port + 10000);
      return port;
    } catch (const std::runtime_error&) {
    }
  }
  throw std::runtime_error("no free loopback port pair for a cluster node");
}

class redis_cluster_servers {
 public:
  /// `node_timeout_ms`: cluster-node-timeout (1 s: a failover within a test's seconds; Redis's
  /// own default is 15 s).
  /// `password`: every node's requirepass (and masterauth, for its replicas).
  redis_cluster_servers(int masters, int replicas, std::string maxmemory = "256mb",
                        int node_timeout_ms = 1000, std::string password = {}) {
    std::string t = (std::filesystem::temp_directory_path() / "kvtier-cluster-XXXXXX").string();
    dir_ = ::mkdtemp(t.data());
    std::vector<std::string> extra = {"--cluster-enabled", "yes", "--cluster-config-file",
                                      "nodes.conf", "--cluster-node-timeout",
                                      std::to_string(node_timeout_ms),
                                      "--repl-diskless-sync-delay", "0"};
    if (!password.empty())
      extra.insert(extra.end(), {"--masterauth", password});
    for (int i = 0; i < masters * (1 + replicas); ++i)
      nodes_.push_back(std::make_unique<redis_server>(
        maxmemory, extra, dir_ + "/" + std::to_string(i), free_cluster_port(), password));
    std::string create = "redis-cli --no-auth-warning" +
                         (password.empty() ? std::string() : " -a " + password) +
                         " --cluster create";
    for (const auto& n : nodes_)
      create += " " + n->address();
    create += " --cluster-replicas " + std::to_string(replicas) + " --cluster-yes >/dev/null 2>&1";
    if (std::system(create.c_str()) != 0)
      throw std::runtime_error("redis-cli --cluster create failed: " + create);
    wait_ok();
  }
  ~redis_cluster_servers() {
    nodes_.clear();
    std::filesystem::remove_all(dir_);
  }

  std::vector<std::string> seeds() const {
    std::vector<std::string> out;
    for (const auto& n : nodes_)
      out.push_back(n->address());
    return out;
  }
  redis_server& node(size_t i) { return *nodes_.at(i); }
  size_t size() const { return nodes_.size(); }

  /// Keys held by the masters now (a replica's copies are not counted twice).
  uint64_t master_keys() const {
    uint64_t n = 0;
    for (const auto& s : nodes_)
      if (s->running() && is_master(*s))
        n += s->keys();
    return n;
  }
  static bool is_master(const redis_server& s) {
    return s.command({"INFO", "replication"}).find("role:master") != std::string::npos;
  }

  /// The index of master `m`'s first replica (SIZE_MAX if it has none).
  size_t replica_of(size_t m) const {
    std::string info = nodes_.at(m)->command({"INFO", "replication"});
    size_t at = info.find("slave0:");
    size_t port_at = info.find("port=", at);
    if (at == std::string::npos || port_at == std::string::npos)
      return SIZE_MAX;
    int port = std::atoi(info.c_str() + port_at + 5);
    for (size_t i = 0; i < nodes_.size(); ++i)
      if (nodes_[i]->port() == port)
        return i;
    return SIZE_MAX;
  }

  /// Waits until every master's replicas have acknowledged all it was written (WAIT only counts
  /// the asking connection's own writes).
  void wait_replicated(int seconds = 10) const {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    auto field = [](const std::string& text, const std::string& name) {
      size_t at = text.find(name);
      return at == std::string::npos ? -1LL : std::atoll(text.c_str() + at + name.size());
    };
    while (std::chrono::steady_clock::now() < deadline) {
      bool all = true;
      for (const auto& n : nodes_) {
        std::string info = n->running() ? n->command({"INFO", "replication"}) : "";
        if (info.find("role:master") == std::string::npos ||
            info.find("slave0:") == std::string::npos)
          continue;
        long long master = field(info, "master_repl_offset:");
        long long replica = field(info.substr(info.find("slave0:")), "offset=");
        all = all && master >= 0 && replica == master;
      }
      if (all)
        return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    throw std::runtime_error("the test cluster's replicas did not catch up");
  }

  /// Waits until every running node says cluster_state:ok and every replica has synced with its
  /// master (a replica that never has cannot take over from it).
  void wait_ok(int seconds = 20) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      bool ok = true;
      for (const auto& n : nodes_) {
        if (!n->running())
          continue;
        ok = ok && n->command({"CLUSTER", "INFO"}).find("cluster_state:ok") != std::string::npos;
        std::string replication = n->command({"INFO", "replication"});
        if (replication.find("role:slave") != std::string::npos)
          ok = ok && replication.find("master_link_status:up") != std::string::npos;
      }
      if (ok)
        return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    throw std::runtime_error("the test's redis cluster did not reach cluster_state:ok");
  }

 private:
  std::string dir_;
  std::vector<std::unique_ptr<redis_server>> nodes_;
};

}  // namespace kvtier::test
