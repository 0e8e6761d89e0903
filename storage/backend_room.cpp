#include "storage/backend_room.hpp"

#include <hiredis/hiredis.h>
#include <sys/statvfs.h>

#include <cstdlib>
#include <memory>

#include "storage/redis_backend.hpp"
#include "storage/redis_cluster_router.hpp"
#include "storage/redis_dial.hpp"

namespace kvtier {

namespace {

struct reply_free {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using reply_ptr = std::unique_ptr<redisReply, reply_free>;

// The value of `field` in an INFO reply's "field:value" lines.
std::optional<uint64_t> info_field(const std::string& info, const std::string& field) {
  size_t at = info.find("\n" + field + ":");
  if (at == std::string::npos)
    return std::nullopt;
  return std::strtoull(info.c_str() + at + field.size() + 2, nullptr, 10);
}

}  // namespace

std::optional<redis_memory> redis_memory_of(const std::string& address,
                                            const redis_access& access) {
  timeval tv{2, 0};
  std::unique_ptr<redisContext, void (*)(redisContext*)> c(redis_dial(address, access, tv, tv),
                                                           redisFree);
  if (!c)
    return std::nullopt;
  reply_ptr info(static_cast<redisReply*>(redisCommand(c.get(), "INFO memory")));
  if (!info || info->type != REDIS_REPLY_STRING)
    return std::nullopt;
  std::string text = "\n" + std::string(info->str, info->len);
  redis_memory m;
  m.maxmemory = info_field(text, "maxmemory").value_or(0);
  m.used_memory = info_field(text, "used_memory").value_or(0);
  reply_ptr policy(
    static_cast<redisReply*>(redisCommand(c.get(), "CONFIG GET maxmemory-policy")));
  if (policy && policy->type == REDIS_REPLY_ARRAY && policy->elements == 2 &&
      policy->element[1]->type == REDIS_REPLY_STRING)
    m.policy.assign(policy->element[1]->str, policy->element[1]->len);
  return m;
}

std::vector<std::string> redis_cluster_masters(const std::vector<std::string>& seeds,
                                               const redis_access& access) {
  redis_cluster_router router(seeds, 0, access);
  router.refresh();
  return router.masters();
}

bool is_local_address(const std::string& address) {
  std::string host = parse_redis_address(address).first;
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

std::optional<uint64_t> free_disk_bytes(const std::string& dir) {
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) != 0)
    return std::nullopt;
  return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
}

}  // namespace kvtier
