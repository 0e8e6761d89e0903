#pragma once

// Block payloads in Redis: one redis-server per storage node (storage.redis = ["host:port", ...]),
// reached with hiredis's asynchronous API from one I/O thread that polls every connection.
//
// A block is stored in two parts, as FastDeploy's packed storage format keeps K and V apart:
// "kvtier:<model>:<dtype>:<hash>:k" (the first half of its bytes) and ":v" (the rest), on the
// block's home node. A block counts only when both parts are there: exists and get ask for both
// in one command (EXISTS / MGET), and a put whose second part failed deletes the first
// (FastDeploy's rollback of a partly written block), so a half-written block is never visible as
// a block.
//
// Batches are pipelined: every command of a batch is queued on its node's connection before one
// write, and the batch answers when the last reply is in.
//
// A node that cannot be reached (refused, reset, or silent for `op_timeout`) is down: its gets
// miss, its puts fail and are counted, its exists answer absent. It is redialled with exponential
// backoff (50 ms doubling to 2 s); commands in flight when it went down complete as failures.
//
// Memory policy: the pool's index enforces capacity and removes evicted blocks (DEL), so keys
// need no TTL (storage.redis_ttl_s sets one, for pools shared with processes that never evict).
// Run each server with `maxmemory` above the node's share of storage.capacity_* plus Redis's
// overhead and `maxmemory-policy noeviction`: a write Redis refuses for memory then fails the
// block (and rolls back its other part) instead of Redis silently dropping half of another block.

#include <atomic>
#include <memory>
#include <thread>

#include "storage/lister_threads.hpp"
#include "storage/storage_backend.hpp"

namespace kvtier {

class redis_backend final : public storage_backend {
 public:
  explicit redis_backend(const backend_options& o);
  ~redis_backend() override;

  std::string name() const override { return "redis"; }
  bool asynchronous() const override { return true; }
  void exists(std::vector<block_ref> blocks, exists_done done) override;
  void get(std::vector<block_ref> blocks, std::vector<block_span> into, get_done done) override;
  void put(std::vector<block_ref> blocks, std::vector<block_bytes_t> payloads,
           put_done done) override;
  void remove(std::vector<block_ref> blocks, remove_done done) override;
  void list(list_done done) override;
  backend_counters counters() const override;

  /// Whether node `n` is connected now.
  bool node_up(uint32_t n) const;
  bool node_reachable(uint32_t n) const override { return node_up(n); }

  struct loop;  // the I/O thread's state (redis_loop.hpp)

 private:
  backend_options options_;
  std::unique_ptr<loop> loop_;
  lister_threads listers_;
};

/// "host:port" -> (host, port); throws std::invalid_argument naming the entry.
std::pair<std::string, int> parse_redis_address(const std::string& address);

}  // namespace kvtier
