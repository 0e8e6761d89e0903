#include "serve/server/observe_wiring.hpp"

#include <unistd.h>

#include <stdexcept>

namespace kvtier {

namespace {

void require_local_or_token(const serve::serve_job& job, const std::string& endpoint,
                            const char* option) {
  if (!endpoint.empty() && !serve::is_local_endpoint(endpoint) && job.token.empty())
    throw config_error(std::string(option) + " " + endpoint
                       + " is reachable from other machines: give --token");
}

// This machine's name: the pod of the default events topic.
std::string host_name() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0')
    return "localhost";
  return name;
}

}  // namespace

std::unique_ptr<serve_events> open_events(const serve::serve_job& job) {
  serve_events_options o = job.events;
  if (o.endpoint.empty()) {
    if (!o.replay_endpoint.empty())
      throw config_error("--events-replay needs --events (the stream it replays)");
    return std::make_unique<serve_events>(o);
  }
  require_local_or_token(job, o.endpoint, "--events");  // bound or connected to
  require_local_or_token(job, o.replay_endpoint, "--events-replay");
  o.socket = *events_socket_of(job.cfg.text(keys::serve::events_socket));  // a checked choice
  try {
    o.topic = events_topic(job.cfg.text(keys::serve::events_topic), host_name(),
                           job.cfg.text(keys::model::name));
  } catch (const std::invalid_argument& e) {
    throw config_error(e.what());
  }
  o.buffer_batches = static_cast<uint64_t>(job.cfg.integer(keys::serve::events_buffer));
  o.hwm = static_cast<uint64_t>(job.cfg.integer(keys::serve::events_hwm));
  o.layout = *event_layout_of(job.cfg.text(keys::serve::events_layout));  // a checked choice
  try {
    return std::make_unique<serve_events>(o);
  } catch (const std::invalid_argument& e) {
    throw config_error(e.what());
  }
}

std::unique_ptr<serve_metrics> open_metrics(const serve::serve_job& job,
                                            const serve_metrics_sources& sources) {
  if (job.metrics.port < 0)
    return nullptr;
  const std::string& host = job.metrics.host;
  bool local = host == "127.0.0.1" || host == "localhost" || host == "::1";
  if (!local && job.token.empty())
    throw config_error("--metrics-host " + host
                       + " is reachable from other machines: give --token");
  return std::make_unique<serve_metrics>(job.metrics, sources);
}

}  // namespace kvtier
