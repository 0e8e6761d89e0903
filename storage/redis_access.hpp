#pragma once

// How kvtier reaches a Redis server and proves who it is (storage.redis_user,
// storage.redis_password_file or KVTIER_REDIS_PASSWORD, storage.redis_tls*; docs/design.md
// "Secured Redis"): plain settings, carried in backend_options; redis_dial.hpp dials with them.
//
// The password is held here and nowhere else: it is sent in AUTH, never printed, never written to
// an output, and a refusal names the user, not the password.

#include <memory>
#include <string>

namespace kvtier {

class redis_tls_relay;

/// TLS to Redis (Redis's tls-port). Debian 12's hiredis (0.14.1) has no TLS of its own: the
/// connection is encrypted in this process by OpenSSL (redis_tls.hpp) and hiredis speaks the
/// protocol through it.
struct redis_tls_options {
  bool enabled = false;
  std::string ca_file;      ///< certificates the server's is checked against (empty: system's)
  std::string cert_file;    ///< this client's certificate (Redis's tls-auth-clients), optional
  std::string key_file;     ///< its private key
  std::string server_name;  ///< the name the certificate must carry (empty: the address's host)
};

struct redis_access {
  std::string user;      ///< ACL user; empty: the default user (AUTH <password>)
  std::string password;  ///< empty: no AUTH
  redis_tls_options tls;
  /// The encrypting relay for `tls`, shared by copies of this value: made by prepare_redis_access
  /// before any connection is dialled.
  std::shared_ptr<redis_tls_relay> relay;

  bool authenticates() const { return !password.empty(); }
};

/// Makes what `a` needs before dialling (the TLS relay, its certificates read); throws
/// std::invalid_argument naming the key of a file that cannot be used.
void prepare_redis_access(redis_access& a);

}  // namespace kvtier
