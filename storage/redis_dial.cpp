#include "storage/redis_dial.hpp"

#include <sys/socket.h>

#include <memory>

#include "storage/redis_backend.hpp"
#include "storage/redis_tls.hpp"

namespace kvtier {

namespace {

struct reply_free {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using reply_ptr = std::unique_ptr<redisReply, reply_free>;

std::string words_of(const redisReply* r) {
  if (!r)
    return "no reply";
  if (r->str)
    return std::string(r->str, r->len);
  return "unexpected reply";
}

}  // namespace

void redis_abandon(int fd) {
  if (fd < 0)
    return;
  linger reset{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
}

void prepare_redis_access(redis_access& a) {
  if (a.tls.enabled && !a.relay)
    a.relay = std::make_shared<redis_tls_relay>(a.tls);
}

bool redis_auth_refused(const redisReply* r) {
  if (!r || r->type != REDIS_REPLY_ERROR || !r->str)
    return false;
  std::string text(r->str, r->len);
  for (const char* word : {"WRONGPASS", "NOAUTH", "NOPERM", "ERR AUTH", "ERR invalid password",
                           "ERR Client sent AUTH"})
    if (text.rfind(word, 0) == 0)
      return true;
  return false;
}

std::string redis_authenticate(redisContext* c, const redis_access& access) {
  reply_ptr r;
  if (!access.authenticates()) {
    // No password: one round trip proves the path carries commands (through TLS too) and that
    // the server does not want one (NOAUTH).
    r.reset(static_cast<redisReply*>(redisCommand(c, "PING")));
    if (r && r->type == REDIS_REPLY_STATUS)
      return {};
    if (redis_auth_refused(r.get()))
      return "the server wants credentials (storage.redis_password_file or "
             "KVTIER_REDIS_PASSWORD): " + words_of(r.get());
    return c->err ? std::string(c->errstr) : words_of(r.get());
  }
  if (access.user.empty())
    r.reset(static_cast<redisReply*>(redisCommand(c, "AUTH %b", access.password.data(),
                                                   access.password.size())));
  else
    r.reset(static_cast<redisReply*>(redisCommand(c, "AUTH %b %b", access.user.data(),
                                                   access.user.size(), access.password.data(),
                                                   access.password.size())));
  if (r && r->type == REDIS_REPLY_STATUS)
    return {};
  if (!r)
    return c->err ? std::string(c->errstr) : "no reply to AUTH";
  return "the credentials were refused (user " +
         (access.user.empty() ? std::string("default") : "'" + access.user + "'") + "): " +
         words_of(r.get());
}

redisContext* redis_dial(const std::string& address, const redis_access& access,
                         timeval connect_timeout, timeval reply_timeout, std::string* why) {
  auto [host, port] = parse_redis_address(address);
  redisContext* c = nullptr;
  if (access.tls.enabled) {
    if (!access.relay) {
      if (why)
        *why = "TLS is not set up (prepare_redis_access)";
      return nullptr;
    }
    std::string entry = access.relay->entry_for(address);
    c = redisConnectUnixWithTimeout(entry.c_str(), connect_timeout);
  } else {
    c = redisConnectWithTimeout(host.c_str(), port, connect_timeout);
  }
  if (!c || c->err) {
    if (why)
      *why = c ? std::string(c->errstr) : "out of memory";
    if (c)
      redisFree(c);
    return nullptr;
  }
  redisSetTimeout(c, reply_timeout);
  std::string refused = redis_authenticate(c, access);
  if (!refused.empty()) {
    if (why) {
      *why = refused;
      if (access.tls.enabled) {
        std::string tls = access.relay->last_error(address);
        if (!tls.empty())
          *why = "TLS: " + tls;
      }
    }
    redisFree(c);
    return nullptr;
  }
  return c;
}

}  // namespace kvtier
