#pragma once

// What the server tells whoever watches it (metrics, logs, event publishers): one call per
// answered protocol call, per prompt matched, per engine change. Every method runs on the thread
// of the server actor that answers, in the order things happen there; with a stack per engine
// several server actors call it side by side (docs/design.md, "Controller stacks"), so an
// observer must take calls from several threads at once (the metrics' are atomic adds; KV events,
// whose order matters, are refused with a stack per engine) and must not block.

#include <cstdint>
#include <optional>
#include <string>

#include "serve/wire/call.hpp"

namespace kvtier::serve {

class serve_observer {
 public:
  virtual ~serve_observer() = default;
  /// A call was answered; `latency_ns` from when the socket thread read it to its reply.
  virtual void on_call(verb, int64_t /*latency_ns*/, std::optional<error_kind>) {}
  /// A frame that named no known verb (too large, undecodable, an unknown op) was refused.
  virtual void on_refused(error_kind) {}
  /// A prompt of `prompt_blocks` blocks was matched: by `lookup` (verb::lookup, which takes
  /// nothing) or by an admission in a step (verb::step); the leading hits per tier.
  virtual void on_hits(verb, uint32_t /*prompt_blocks*/, uint32_t /*device*/, uint32_t /*host*/,
                       uint32_t /*storage*/) {}
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
