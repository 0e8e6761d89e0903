#pragma once

// One blocking hiredis connection per cluster node, dialled when first needed and dropped when it
// fails (the next use dials again). Used by one thread at a time (redis_cluster_router.hpp).

#include <hiredis/hiredis.h>

#include <map>
#include <memory>
#include <string>

namespace kvtier {

struct redis_reply_free {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using redis_reply_ptr = std::unique_ptr<redisReply, redis_reply_free>;

class redis_cluster_pool {
 public:
  redis_cluster_pool() = default;
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

 private:
  std::map<std::string, redisContext*> connections_;
};

}  // namespace kvtier
