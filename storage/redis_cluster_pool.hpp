#pragma once

// One blocking hiredis connection per cluster node, dialled when first needed (authenticated, and
// through TLS where set: redis_dial.hpp) and dropped when it fails (the next use dials again).
// Used by one thread at a time (redis_cluster_router.hpp).

#include <hiredis/hiredis.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>

#include "storage/redis_access.hpp"

namespace kvtier {

struct redis_reply_free {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using redis_reply_ptr = std::unique_ptr<redisReply, redis_reply_free>;

class redis_cluster_pool {
 public:
  explicit redis_cluster_pool(redis_access access = {}) : access_(std::move(access)) {}
  ~redis_cluster_pool();
  redis_cluster_pool(const redis_cluster_pool&) = delete;
  redis_cluster_pool& operator=(const redis_cluster_pool&) = delete;

  /// The connection to `address` ("host:port"), dialled now if there is none; null if the node
  /// cannot be reached.
  redisContext* connection(const std::string& address);
  /// Forgets a connection that failed.
  void drop(const std::string& address);
  /// Runs one command on `address`; null if the node cannot be reached or the connection fails.
  redis_reply_ptr command(const std::string& address, const char* format, ...);
  /// Why the last dial to a node failed (unreachable, TLS, credentials refused); "" if none did.
  const std::string& last_refusal() const { return last_refusal_; }
  /// Dials whose credentials a node refused.
  uint64_t auth_failures() const { return auth_failures_.load(); }

 private:
  redis_access access_;
  std::map<std::string, redisContext*> connections_;
  std::string last_refusal_;
  std::atomic<uint64_t> auth_failures_{0};  // read from other threads (counters)
};

}  // namespace kvtier
