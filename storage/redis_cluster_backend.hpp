#pragma once

// Block payloads in a Redis Cluster (storage.backend=redis_cluster, storage.redis_cluster = seed
// nodes "host:port"): the cluster, not the pool, places each block, by its hash slot.
//
// A block is stored as the redis backend stores it, in two parts (redis_backend.hpp), named
// "{kvtier:<model>:<dtype>:<hash>}:k" and ":v": the braces are a hash tag, so both parts live in
// one slot and a block's EXISTS, MGET and DEL stay single commands on one node.
//
// Commands go through redis_cluster_router.hpp (slot routing, MOVED and ASK redirects, slot map
// refreshed from another node when one fails), from one I/O thread that takes batches in order,
// with blocking connections: one node's pipeline is written and its replies read before the next
// node's. A put whose second part failed deletes the first, as in the redis backend.
//
// A master that dies: its commands are retried while the cluster fails over (a replica takes its
// slots), for at most the failover wait: storage.redis_failover_wait_s, or by default twice the
// cluster's own cluster-node-timeout (asked with CONFIG GET at start) plus 5 s; what is still not
// done then fails (gets miss, puts are dropped and counted, deletes are reported not done and
// retried by the pool). While the cluster cannot serve every slot, or a master found down still
// owns slots, node_reachable() is false; when it serves again, that counts as a reconnect, and the
// pool reconciles its index with the cluster both ways: blocks the failover lost (written to the
// old master, never replicated) are counted as lost and leave the index, and blocks the cluster
// holds that the index does not (deletes that failed during the outage) are deleted
// (docs/robustness.md, "Nothing left behind").

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>

#include "storage/lister_threads.hpp"
#include "storage/storage_backend.hpp"

namespace kvtier {

class redis_cluster_router;

class redis_cluster_backend final : public storage_backend {
 public:
  explicit redis_cluster_backend(const backend_options& o);
  ~redis_cluster_backend() override;

  std::string name() const override { return "redis_cluster"; }
  bool asynchronous() const override { return true; }
  void exists(std::vector<block_ref> blocks, exists_done done) override;
  void get(std::vector<block_ref> blocks, std::vector<block_span> into, get_done done) override;
  void put(std::vector<block_ref> blocks, std::vector<block_bytes_t> payloads,
           put_done done) override;
  void remove(std::vector<block_ref> blocks, remove_done done) override;
  void list(list_done done) override;
  backend_counters counters() const override;
  bool node_reachable(uint32_t) const override;
  std::string start_note() const override;
  /// How long a command waits for a failover before it fails.
  int64_t failover_wait_ns() const;
  /// The failover wait for a cluster whose cluster-node-timeout is `node_timeout_ms`.
  static int64_t failover_wait_for(int64_t node_timeout_ms);

  /// The masters that served the slots when the backend started.
  const std::vector<std::string>& masters() const { return masters_; }
  /// "{<block_name>}:k" or ":v": a block part's key, hash-tagged to one slot.
  static std::string part_key(const block_namespace& ns, uint64_t hash, int part);
  /// The hash a part key names; nullopt for any other key.
  static std::optional<uint64_t> hash_of_part_key(const block_namespace& ns,
                                                  const std::string& key, int* part);

  /// One batch, from submission until its completion runs.
  struct job {
    enum class kind { exists, get, put, remove } what = kind::exists;
    std::vector<block_ref> blocks;
    std::vector<block_span> into;
    std::vector<block_bytes_t> payloads;
    exists_done on_exists;
    get_done on_get;
    put_done on_put;
    remove_done on_remove;
  };

 private:
  void submit(std::unique_ptr<job> j);
  void serve();
  void run_exists(job& j);
  void run_get(job& j);
  void run_put(job& j);
  void run_remove(job& j);
  int64_t node_timeout_ms();

  backend_options options_;
  std::unique_ptr<redis_cluster_router> router_;
  std::vector<std::string> masters_;
  bool node_timeout_said_ = false;  // the cluster told its cluster-node-timeout
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::unique_ptr<job>> jobs_;
  bool stopping_ = false;
  std::thread thread_;
  lister_threads listers_;
  mutable std::mutex counters_mutex_;
  backend_counters counters_;
};

}  // namespace kvtier
