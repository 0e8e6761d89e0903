#pragma once

// TLS to Redis with Debian 12's hiredis (0.14.1), which has no TLS of its own: an in-process
// relay. Each Redis address gets a Unix socket in a private directory (mode 0700) of this
// process; hiredis dials that socket, and a relay thread carries each connection's bytes to the
// server over TLS (OpenSSL, the server's certificate checked against storage.redis_tls_ca_file
// and its name, a client certificate where the server asks for one). Nothing leaves the process
// unencrypted; what hiredis reads and writes is the same protocol as on a plain socket, so every
// connection kvtier makes (async, blocking, listings, the pre-start check) works unchanged.
//
// A server that cannot be reached, or whose handshake fails (certificate, name, protocol), has
// its relayed connection closed: hiredis sees the connection end as it would see a refused
// one, and last_error() says why, for the message. Limits: TLS 1.2 or later; no session resumption
// (a reconnect is a full handshake); one relay thread for all connections of a backend.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "storage/redis_access.hpp"

namespace kvtier {

class redis_tls_relay {
 public:
  /// Reads the certificates now; throws std::invalid_argument naming the key of a file that
  /// cannot be used.
  explicit redis_tls_relay(const redis_tls_options& o);
  ~redis_tls_relay();
  redis_tls_relay(const redis_tls_relay&) = delete;
  redis_tls_relay& operator=(const redis_tls_relay&) = delete;

  /// The Unix socket whose connections are relayed over TLS to `address` ("host:port"), made
  /// now if there is none yet.
  std::string entry_for(const std::string& address);
  /// Why the last relayed connection to `address` failed ("" if none has).
  std::string last_error(const std::string& address) const;
  /// Handshakes that failed (certificate, name, protocol), all addresses together.
  uint64_t handshake_failures() const { return handshake_failures_.load(); }

  struct state;  // the relay thread's (redis_tls.cpp)

 private:
  std::unique_ptr<state> state_;
  std::atomic<uint64_t> handshake_failures_{0};
  std::thread thread_;
};

}  // namespace kvtier
