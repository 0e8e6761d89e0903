#pragma once

// How `kvtier serve` opens its KV events and metrics from its job (command line and serve.*
// keys): the same rule as its own socket (an address other machines can reach needs --token),
// and bad endpoints reported as bad input (config_error, exit 2).

#include <memory>

#include "serve/server/observe/serve_events.hpp"
#include "serve/server/observe/serve_metrics.hpp"
#include "serve/server/server.hpp"

namespace kvtier {

/// The publisher (off when --events is not given); throws config_error for an endpoint that is
/// bad or reachable from elsewhere without a token, std::runtime_error for one that is taken.
std::unique_ptr<serve_events> open_events(const serve::serve_job& job);

/// The metrics endpoint (null when --metrics-port is not given); throws config_error for a
/// host reachable from elsewhere without a token, std::runtime_error for a port that is taken.
std::unique_ptr<serve_metrics> open_metrics(const serve::serve_job& job,
                                            const serve_metrics_sources& sources);

}  // namespace kvtier
