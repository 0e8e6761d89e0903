#include "storage/redis_cluster_backend.hpp"

#include <chrono>
#include <cstring>
#include <stdexcept>

#include "core/check.hpp"
#include "storage/redis_backend.hpp"
#include "storage/redis_cluster_router.hpp"

namespace kvtier {

namespace {

constexpr int64_t failover_wait_ns = 10'000'000'000;
constexpr const char* part_suffix[2] = {":k", ":v"};

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
  router_ = std::make_unique<redis_cluster_router>(o.redis_cluster, failover_wait_ns);
  if (!router_->refresh()) {
    std::string seeds;
    for (const std::string& a : o.redis_cluster)
      seeds += (seeds.empty() ? "" : ", ") + a;
    throw std::runtime_error("storage.redis_cluster: no seed (" + seeds +
                             ") answered CLUSTER SLOTS with every slot served");
  }
  masters_ = router_->masters();
  thread_ = std::thread([this] { serve(); });
}

redis_cluster_backend::~redis_cluster_backend() {
  for (auto& t : listers_)
    t.join();
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

backend_counters redis_cluster_backend::counters() const {
  std::lock_guard<std::mutex> guard(counters_mutex_);
  backend_counters c = counters_;
  c.node_downs = router_->node_downs;
  c.reconnects = router_->recoveries;
  return c;
}

}  // namespace kvtier
