#pragma once

// `kvtier serve`: the cache controller, transfer engine and storage pool on the wall clock behind
// a ZeroMQ ROUTER socket (docs/protocol.md). One thread owns the socket (socket_loop.hpp): it
// reads each call, hands it to the server actor (server_actor.hpp) and sends the replies the
// actor leaves in an outbox, woken by an eventfd.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/run_modes.hpp"
#include "runtime/config/options.hpp"
#include "serve/server/observe/observer.hpp"
#include "serve/server/observe/serve_events.hpp"
#include "serve/server/observe/serve_metrics.hpp"

namespace kvtier::serve {

struct serve_job {
  config cfg;                 ///< defaults, file and --set applied
  std::string bind;           ///< ZeroMQ endpoint
  std::string token;          ///< empty: none (loopback binds only)
  /// CURVE (serve/wire/curve.hpp): the file of the server's secret key (empty: plaintext, for
  /// loopback binds only), and of the client public keys it admits (empty: any).
  std::string curve_key_file;
  std::string curve_clients_file;
  double speed = 1.0;         ///< virtual seconds per wall second (modelled links and media)
  /// Real mode (--backend cuda): copies run on the GPU, on the KV tensors the engine exports in
  /// hello; `verify` fills computed blocks with their pattern and checks every swap-in.
  copy_backend_kind backend = copy_backend_kind::modelled;
  bool verify = false;
  std::vector<std::shared_ptr<serve_observer>> observers;
  /// KV events (docs/events.md); the endpoint empty: off. Topic, ring and HWM come from the
  /// serve.events_* keys.
  serve_events_options events;
  /// GET /metrics (docs/metrics.md); port -1: off.
  serve_metrics_options metrics;
  /// Told once the socket is bound and the storage index rebuilt (the CLI prints it).
  std::function<void(const std::string&)> on_ready;
};

/// True for endpoints that only this machine can reach (loopback TCP, ipc, inproc).
bool is_local_endpoint(const std::string& endpoint);

/// Runs until SIGTERM or SIGINT; returns the exit code (0 after a clean shutdown). Throws
/// config_error for bad settings (a non-loopback bind without a token or a CURVE key, a bad
/// endpoint, a key file that is not one).
int run_server(const serve_job& job);

}  // namespace kvtier::serve
