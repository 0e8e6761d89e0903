#pragma once

// Runs commands on a Redis Cluster: each to the master serving its key's slot (the slot map from
// `CLUSTER SLOTS`), pipelined per node. A MOVED reply updates the map and the command goes to
// the node it names; an ASK reply sends it there once, after ASKING. A node that cannot be
// reached, or a cluster that says it is down (CLUSTERDOWN, TRYAGAIN), makes the router ask
// another known node for the slot map again (a replica promoted by a failover takes its old
// master's slots) and retry, for at most `failover_wait` in all; a command still not answered
// then fails (null reply). Used by one thread at a time.

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "storage/redis_cluster_pool.hpp"
#include "storage/redis_cluster_slots.hpp"

namespace kvtier {

/// One command: the key that routes it and its words; a payload (if any) goes in as the word
/// at `payload_at`, straight from the caller's memory.
struct cluster_command {
  std::string key;
  std::vector<std::string> words;
  const uint8_t* payload = nullptr;
  size_t payload_len = 0;
  size_t payload_at = 0;
};

class redis_cluster_router {
 public:
  redis_cluster_router(std::vector<std::string> seeds, int64_t failover_wait_ns,
                       redis_access access = {});

  /// Reads the slot map from the first known node that answers; true if every slot is served.
  bool refresh();
  /// Each command's reply, in order; null where it could not be run in time.
  std::vector<redis_reply_ptr> run(const std::vector<cluster_command>& commands);

  std::vector<std::string> masters() const { return map_.masters(); }
  /// Whether the last slot map read covered every slot.
  bool complete() const { return map_.complete(); }
  void set_failover_wait(int64_t ns) { failover_wait_ns_ = ns; }
  int64_t failover_wait() const { return failover_wait_ns_; }
  /// Seeds and every node the slot maps named so far (safe from any thread).
  std::vector<std::string> known_nodes() const;
  redis_cluster_pool& pool() { return pool_; }

  /// Whether the last commands found every slot served (false from a node's failure until a
  /// run completes again).
  std::atomic<bool> serving{true};
  std::atomic<uint64_t> node_downs{0};  ///< nodes found unreachable
  std::atomic<uint64_t> recoveries{0};  ///< times the cluster served again after a failure
  std::atomic<uint64_t> moved{0}, asked{0};

 private:
  struct routed {
    std::vector<std::string> where;  // node per command
    std::vector<uint8_t> asking;     // send ASKING first
    std::vector<size_t> again;       // commands to retry
    bool trouble = false;            // a node down or the cluster unsettled: refresh first
  };
  void exchange(const std::string& address, const std::vector<size_t>& which,
                const std::vector<cluster_command>& commands, routed& r,
                std::vector<redis_reply_ptr>& replies);
  bool send(redisContext* c, const std::vector<size_t>& which,
            const std::vector<cluster_command>& commands, const routed& r);
  void settle(size_t i, redis_reply_ptr reply, routed& r, std::vector<redis_reply_ptr>& replies);
  void note_down(const std::string& address);
  bool down_master_owns_slots() const;

  int64_t failover_wait_ns_;
  slot_map map_;
  redis_cluster_pool pool_;
  mutable std::mutex known_mutex_;
  std::vector<std::string> known_;
  std::vector<std::string> down_;  // nodes found down since the cluster last served
  int64_t gave_up_at_ = 0;
  int64_t refreshed_at_ = 0;
};

}  // namespace kvtier
