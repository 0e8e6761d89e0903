#pragma once

// The metrics of `kvtier serve` (docs/metrics.md): an observer of the server's calls (counts,
// latencies, errors, hits per tier) and, at each scrape, the figures the actors keep (tiers,
// evictions, links, copies in flight, events). Made after the actors and destroyed before the
// actor system: the endpoint's thread asks the actors for their reports.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "caf/all.hpp"

#include "actors/messages.hpp"
#include "serve/server/observe/observer.hpp"

namespace kvtier {

class event_publisher;
class metrics_registry;
class metrics_http;

struct serve_metrics_options {
  std::string host = "127.0.0.1";  ///< --metrics-host
  int port = -1;                   ///< --metrics-port; -1: off; 0: a free port
};

/// Where the scrape-time figures come from.
struct serve_metrics_sources {
  caf::actor_system* system = nullptr;
  /// Every controller stack's (serve/server/server_plan.hpp): their figures are summed.
  std::vector<cache_controller_actor> controllers;
  std::vector<transfer_engine_actor> engines;
  storage_actor storage;
  uint64_t device_blocks = 0;  ///< of all stacks
  uint64_t host_blocks = 0;
  event_publisher* events = nullptr;  ///< null: no events metrics
};

class serve_metrics {
 public:
  /// Registers every metric and starts the endpoint; throws std::runtime_error naming the
  /// address when it cannot listen.
  serve_metrics(const serve_metrics_options& options, const serve_metrics_sources& sources);
  ~serve_metrics();

  /// The observer to add to the server's observers (it may outlive this object).
  std::shared_ptr<serve::serve_observer> observer() const { return observer_; }
  uint16_t port() const;
  /// kvtier_refused_connections_total: `refused` read at each scrape (socket_loop's count of
  /// failed handshakes).
  void count_refused_connections(std::shared_ptr<const std::atomic<uint64_t>> refused);
  /// "kvtier serve: metrics on http://HOST:PORT/metrics".
  std::string ready_line() const;

 private:
  std::shared_ptr<metrics_registry> registry_;
  std::shared_ptr<serve::serve_observer> observer_;
  std::unique_ptr<metrics_http> http_;
  std::string host_;
};

}  // namespace kvtier
