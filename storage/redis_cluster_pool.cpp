#include "storage/redis_cluster_pool.hpp"

#include <cstdarg>

#include "storage/redis_dial.hpp"

namespace kvtier {

namespace {

// A dial that waits longer than this is a node down; a reply slower than this too (a node that
// hangs). Generous beside a loopback or LAN round trip, short beside a failover's seconds.
constexpr timeval dial_timeout{0, 500'000};
constexpr timeval reply_timeout{2, 0};

}  // namespace

redis_cluster_pool::~redis_cluster_pool() {
  for (auto& [address, c] : connections_)
    redisFree(c);
}

redisContext* redis_cluster_pool::connection(const std::string& address) {
  auto at = connections_.find(address);
  if (at != connections_.end())
    return at->second;
  std::string why;
  redisContext* c = redis_dial(address, access_, dial_timeout, reply_timeout, &why);
  if (!c) {
    last_refusal_ = address + ": " + why;
    auth_failures_ += why.rfind("the credentials were refused", 0) == 0 ||
                      why.rfind("the server wants credentials", 0) == 0;
    return nullptr;
  }
  connections_.emplace(address, c);
  return c;
}

void redis_cluster_pool::drop(const std::string& address) {
  auto at = connections_.find(address);
  if (at == connections_.end())
    return;
  redis_abandon(at->second->fd);
  redisFree(at->second);
  connections_.erase(at);
}

redis_reply_ptr redis_cluster_pool::command(const std::string& address, const char* format, ...) {
  redisContext* c = connection(address);
  if (!c)
    return nullptr;
  va_list args;
  va_start(args, format);
  auto* r = static_cast<redisReply*>(redisvCommand(c, format, args));
  va_end(args);
  if (!r)
    drop(address);
  return redis_reply_ptr(r);
}

}  // namespace kvtier
