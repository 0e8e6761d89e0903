#include "storage/redis_cluster_backend.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "core/check.hpp"
#include "storage/redis_backend.hpp"
#include "storage/redis_cluster_router.hpp"
#include "storage/redis_tls.hpp"

namespace kvtier {

namespace {

constexpr const char* part_suffix[2] = {":k", ":v"};
// Redis's own default cluster-node-timeout, for a cluster that will not say its own.
constexpr int64_t redis_default_node_timeout_ms = 15'000;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}


}  // namespace


std::string redis_cluster_backend::part_key(const block_namespace& ns, uint64_t hash, int part) {
  return "{" + block_name(ns, hash) + "}" + part_suffix[part];
}

std::optional<uint64_t> redis_cluster_backend::hash_of_part_key(const block_namespace& ns,
                                                                const std::string& key,
                                                                int* part) {
  size_t close = key.find('}');
  if (key.empty() || key[0] != '{' || close == std::string::npos)
    return std::nullopt;
  std::string tail = key.substr(close + 1);
  int which = tail == part_suffix[0] ? 0 : tail == part_suffix[1] ? 1 : -1;
  if (which < 0)
    return std::nullopt;
  if (part)
    *part = which;
  return hash_of_block_name(ns, key.substr(1, close - 1));
}

redis_cluster_backend::redis_cluster_backend(const backend_options& o)
  : storage_backend(o.nodes), options_(o) {
  if (o.redis_cluster.empty())
    throw std::invalid_argument(
      "storage.redis_cluster: the redis_cluster backend needs at least one seed host:port");
  for (const std::string& a : o.redis_cluster) {
    try {
      parse_redis_address(a);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string("storage.redis_cluster") +
                                  (e.what() + std::strlen("storage.redis")));
    }
  }
  prepare_redis_access(options_.redis_auth);
  router_ = std::make_unique<redis_cluster_router>(o.redis_cluster, o.redis_failover_wait_ns,
                                                   options_.redis_auth);
  if (!router_->refresh()) {
    std::string seeds;
    for (const std::string& a : o.redis_cluster)
      seeds += (seeds.empty() ? "" : ", ") + a;
    std::string why = router_->pool().last_refusal();
    std::string what = "storage.redis_cluster: no seed (" + seeds +
                       ") answered CLUSTER SLOTS with every slot served" +
                       (why.empty() ? "" : " (" + why + ")");
    // Credentials or TLS refused: a setting to fix (exit 2), not a cluster down.
    if (router_->pool().auth_failures() > 0 || why.find("TLS") != std::string::npos)
      throw std::invalid_argument(what);
    throw std::runtime_error(what);
  }
  masters_ = router_->masters();
  if (o.redis_failover_wait_ns <= 0)
    router_->set_failover_wait(failover_wait_for(node_timeout_ms()));
  thread_ = std::thread([this] { serve(); });
}

// The cluster's cluster-node-timeout, asked of its masters (CONFIG GET); Redis's default where none
// answers (a managed Redis may rename CONFIG).
int64_t redis_cluster_backend::node_timeout_ms() {
  for (const std::string& m : masters_) {
    redis_reply_ptr r = router_->pool().command(m, "CONFIG GET cluster-node-timeout");
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[1]->type == REDIS_REPLY_STRING) {
      long long ms = std::atoll(r->element[1]->str);
      if (ms > 0) {
        node_timeout_said_ = true;
        return ms;
      }
    }
  }
  return redis_default_node_timeout_ms;
}

// A master is marked failed once cluster-node-timeout passes without an answer and a majority of
// masters agree (their reports gather within another fraction of it); its replica then waits half
// a second to a second, plus a second per rank, and wins an election that Redis abandons after
// twice the timeout (at least 2 s). Twice the timeout and 5 s covers detection, the election and
// the slot maps settling; a failover slower than that fails what it held up (counted).
int64_t redis_cluster_backend::failover_wait_for(int64_t node_timeout_ms) {
  return (2 * node_timeout_ms + 5'000) * 1'000'000;
}

std::string redis_cluster_backend::start_note() const {
  char text[240];
  double wait_s = static_cast<double>(router_->failover_wait()) / 1e9;
  if (options_.redis_failover_wait_ns > 0)
    std::snprintf(text, sizeof(text), "a failed master's commands wait up to %g s for its "
                  "replica to take over (storage.redis_failover_wait_s)", wait_s);
  else
    std::snprintf(text, sizeof(text), "a failed master's commands wait up to %g s for its "
                  "replica to take over (twice %s cluster-node-timeout + 5 s; "
                  "storage.redis_failover_wait_s sets it)", wait_s,
                  node_timeout_said_ ? "the cluster's" : "Redis's default (the cluster would not "
                                                        "say its own)");
  return text;
}

redis_cluster_backend::~redis_cluster_backend() {
  listers_.join_all();
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

bool redis_cluster_backend::node_reachable(uint32_t) const { return router_->serving.load(); }

void redis_cluster_backend::submit(std::unique_ptr<job> j) {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    jobs_.push_back(std::move(j));
  }
  wake_.notify_one();
}

// The I/O thread: batches in the order they came; what is left at the end still runs (a pool
// being torn down waits for its completions).
void redis_cluster_backend::serve() {
  for (;;) {
    std::unique_ptr<job> j;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty())
        return;
      j = std::move(jobs_.front());
      jobs_.pop_front();
    }
    int64_t started = now_ns();
    switch (j->what) {
      case job::kind::exists: run_exists(*j); break;
      case job::kind::get: run_get(*j); break;
      case job::kind::put: run_put(*j); break;
      case job::kind::remove: run_remove(*j); break;
    }
    std::lock_guard<std::mutex> guard(counters_mutex_);
    counters_.busy_ns += now_ns() - started;
    ++counters_.batches;
  }
}

void redis_cluster_backend::exists(std::vector<block_ref> blocks, exists_done done) {
  auto j = std::make_unique<job>();
  j->what = job::kind::exists;
  j->blocks = std::move(blocks);
  j->on_exists = std::move(done);
  submit(std::move(j));
}

void redis_cluster_backend::get(std::vector<block_ref> blocks, std::vector<block_span> into,
                                get_done done) {
  KVTIER_ASSERT(into.size() == blocks.size());
  auto j = std::make_unique<job>();
  j->what = job::kind::get;
  j->blocks = std::move(blocks);
  j->into = std::move(into);
  j->on_get = std::move(done);
  submit(std::move(j));
}

void redis_cluster_backend::put(std::vector<block_ref> blocks,
                                std::vector<block_bytes_t> payloads, put_done done) {
  auto j = std::make_unique<job>();
  j->what = job::kind::put;
  j->blocks = std::move(blocks);
  j->payloads = std::move(payloads);
  j->on_put = std::move(done);
  submit(std::move(j));
}

void redis_cluster_backend::remove(std::vector<block_ref> blocks, remove_done done) {
  auto j = std::make_unique<job>();
  j->what = job::kind::remove;
  j->blocks = std::move(blocks);
  j->on_remove = std::move(done);
  submit(std::move(j));
}

int64_t redis_cluster_backend::failover_wait_ns() const { return router_->failover_wait(); }

backend_counters redis_cluster_backend::counters() const {
  std::lock_guard<std::mutex> guard(counters_mutex_);
  backend_counters c = counters_;
  c.node_downs = router_->node_downs;
  c.reconnects = router_->recoveries;
  c.auth_failures = router_->pool().auth_failures();
  if (options_.redis_auth.relay)
    c.tls_failures = options_.redis_auth.relay->handshake_failures();
  return c;
}

}  // namespace kvtier
