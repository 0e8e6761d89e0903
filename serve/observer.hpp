#pragma once

// What the server tells whoever watches it (metrics, logs, event publishers): one call per
// answered protocol call, per engine change. Every method runs on the server actor's thread,
// in the order things happen; an observer must not block.

#include <cstdint>
#include <optional>
#include <string>

#include "serve/call.hpp"

namespace kvtier::serve {

class serve_observer {
 public:
  virtual ~serve_observer() = default;
  /// A call was answered; `latency_ns` from its arrival at the server actor to its reply.
  virtual void on_call(verb, int64_t /*latency_ns*/, std::optional<error_kind>) {}
  /// An engine registered (`registered`) or left (bye, timeout, shutdown) with `released`
  /// requests still live.
  virtual void on_engine(uint64_t /*engine*/, const std::string& /*name*/, bool /*registered*/,
                         uint64_t /*released*/) {}
};

/// The server's own counters, always kept (stats reads them).
struct serve_counters {
  uint64_t calls[verb_count] = {};
  uint64_t errors[error_kind_count] = {};
  uint64_t engines_registered = 0;
  uint64_t engines_timed_out = 0;
  uint64_t requests_released = 0;  ///< by timeouts, byes and shutdown
};

}  // namespace kvtier::serve
