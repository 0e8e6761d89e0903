#pragma once

// The storage.redis_user, storage.redis_password_file and storage.redis_tls* keys (and the
// KVTIER_REDIS_PASSWORD environment variable) read into a redis_access: who kvtier is to Redis,
// and how its connections are encrypted (storage/redis_access.hpp; docs/design.md "Secured
// Redis"). A password comes from a file or the environment only: never from the command line or a
// config, where `ps`, shell history and summary.json would show it.

#include "runtime/config/options.hpp"
#include "storage/redis_access.hpp"

namespace kvtier {

/// The environment variable a password is read from when storage.redis_password_file is unset.
inline constexpr const char* redis_password_env = "KVTIER_REDIS_PASSWORD";

/// Throws config_error naming the key (never the password) when a file cannot be read or the
/// settings do not go together (a user without a password, TLS files without storage.redis_tls).
redis_access resolve_redis_access(const config& c);

}  // namespace kvtier
