#include "observe/metrics/metrics_http.hpp"

#include <stdexcept>

#include <httplib.h>

#include "observe/metrics/metrics_registry.hpp"

namespace kvtier {

struct metrics_http::server {
  httplib::Server http;
};

metrics_http::metrics_http(metrics_registry& registry, const std::string& host, uint16_t port)
  : server_(std::make_unique<server>()) {
  auto& http = server_->http;
  // cpp-httplib's default also sets SO_REUSEPORT, with which a second server binds a port that
  // is taken and the two share it silently; SO_REUSEADDR alone still allows a quick restart.
  http.set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  http.Get("/metrics", [&registry](const httplib::Request&, httplib::Response& res) {
    res.set_content(registry.render(), metrics_content_type);
  });
  http.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (res.body.empty())
      res.set_content(res.status == 404 ? "not found: kvtier serves GET /metrics\n"
                                        : "bad request\n",
                      "text/plain");
  });
  int bound = port == 0 ? http.bind_to_any_port(host) : (http.bind_to_port(host, port) ? port : -1);
  if (bound <= 0)
    throw std::runtime_error("cannot listen for metrics on " + host + ":" + std::to_string(port));
  port_ = static_cast<uint16_t>(bound);
  thread_ = std::thread([this] { server_->http.listen_after_bind(); });
}

metrics_http::~metrics_http() {
  server_->http.stop();
  thread_.join();
}

}  // namespace kvtier
