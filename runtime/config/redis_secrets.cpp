#include "runtime/config/redis_secrets.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "runtime/config/storage_keys.hpp"

namespace kvtier {

namespace {

// The file's first line, without its line ending: what `echo secret > file` leaves.
std::string read_password_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw config_error("storage.redis_password_file: cannot read '" + path +
                       "': " + std::strerror(errno));
  std::string line;
  std::getline(in, line);
  if (!line.empty() && line.back() == '\r')
    line.pop_back();
  if (line.empty())
    throw config_error("storage.redis_password_file: '" + path +
                       "' holds no password (its first line is empty)");
  return line;
}

std::string text_or_empty(const config& c, text_key key) {
  return c.is_set(key) ? c.text(key) : std::string();
}

}  // namespace

redis_access resolve_redis_access(const config& c) {
  redis_access a;
  a.user = text_or_empty(c, keys::storage::redis_user);
  std::string file = text_or_empty(c, keys::storage::redis_password_file);
  if (!file.empty()) {
    a.password = read_password_file(file);
  } else if (const char* env = std::getenv(redis_password_env); env && *env) {
    a.password = env;
  }
  if (!a.user.empty() && a.password.empty())
    throw config_error(std::string("storage.redis_user: user '") + a.user +
                       "' needs a password: name a file holding it in "
                       "storage.redis_password_file, or set " + redis_password_env);
  a.tls.enabled = c.boolean(keys::storage::redis_tls);
  a.tls.ca_file = text_or_empty(c, keys::storage::redis_tls_ca_file);
  a.tls.cert_file = text_or_empty(c, keys::storage::redis_tls_cert_file);
  a.tls.key_file = text_or_empty(c, keys::storage::redis_tls_key_file);
  a.tls.server_name = text_or_empty(c, keys::storage::redis_tls_server_name);
  if (!a.tls.enabled) {
    for (text_key k : {keys::storage::redis_tls_ca_file, keys::storage::redis_tls_cert_file,
                       keys::storage::redis_tls_key_file, keys::storage::redis_tls_server_name})
      if (c.is_set(k))
        throw config_error(std::string(k.name) + ": set, but storage.redis_tls is false (set "
                                                 "storage.redis_tls=true to connect with TLS)");
  }
  return a;
}

}  // namespace kvtier
