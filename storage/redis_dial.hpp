#pragma once

// Dialling Redis with a redis_access (redis_access.hpp): every connection kvtier opens to Redis
// (the redis backend's I/O thread, a cluster's routers, listings, the pre-start check) is made
// here or with the same settings.

#include <hiredis/hiredis.h>

#include <string>

#include "storage/redis_access.hpp"

namespace kvtier {

/// A blocking connection to `address` ("host:port"), authenticated; null if it cannot be made,
/// with the reason in `why` (when given): unreachable, a TLS failure, or the credentials refused
/// (Redis's words, which never hold the password).
redisContext* redis_dial(const std::string& address, const redis_access& access,
                         timeval connect_timeout, timeval reply_timeout, std::string* why = nullptr);

/// Sends AUTH on `c` when `access` has a password, PING when it has none; "" if the server took
/// it, else why not.
std::string redis_authenticate(redisContext* c, const redis_access& access);

/// Whether Redis's reply to AUTH says the credentials were refused (WRONGPASS, or an AUTH error).
bool redis_auth_refused(const redisReply* r);

/// Before a connection given up on is closed: what kvtier queued on it and the kernel has not
/// sent yet is dropped (the close resets it), so no command counted failed reaches the server
/// later over a path that heals.
void redis_abandon(int fd);

}  // namespace kvtier
