#pragma once

// Serves a metrics_registry as GET /metrics (Prometheus text format 0.0.4) on its own thread,
// with Debian's cpp-httplib. Every other path answers 404; methods other than GET and HEAD, 405.

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

namespace kvtier {

class metrics_registry;

class metrics_http {
 public:
  /// Listens on `host`:`port` (0: a free port, see port()); throws std::runtime_error naming the
  /// address when it cannot bind.
  metrics_http(metrics_registry& registry, const std::string& host, uint16_t port);
  /// Stops listening and joins the thread.
  ~metrics_http();
  metrics_http(const metrics_http&) = delete;
  metrics_http& operator=(const metrics_http&) = delete;

  uint16_t port() const { return port_; }

 private:
  struct server;
  std::unique_ptr<server> server_;
  uint16_t port_ = 0;
  std::thread thread_;
};

/// The Content-Type of the text exposition format.
inline constexpr const char* metrics_content_type = "text/plain; version=0.0.4; charset=utf-8";

}  // namespace kvtier
