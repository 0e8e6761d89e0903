#pragma once

// A request's life in an engine session (engine_session.hpp), as one table of checked
// transitions. The engine names what happens to its requests in its calls (docs/protocol.md:
// `allocate`, and a step's lists); the controller answers the arrival (ready) and each admission
// (the step's grant). Anything else is illegal and refused, never applied:
//
//   allocate ─► loading ─ready─► waiting ─admits─► admitting ─granted─► running ─┐ computed,
//                                  ▲  ▲                │                 │  ▲  ─┘ grows
//                                  │  └─── refused ────┘                 │
//                                  └──────────────── preempted ──────────┘
//   finished: from waiting or running (the request leaves).

#include <cstdint>
#include <optional>
#include <string>

namespace kvtier::session {

enum class req_state : uint8_t { loading, waiting, admitting, running };

enum class req_event : uint8_t {
  loaded,     ///< the controller's `ready`: what storage held has landed (or there was none)
  admitted,   ///< in a step's `admits`
  granted,    ///< the step's grant admitted it
  refused,    ///< the step's grant did not
  computed,   ///< in a step's `computed`
  grown,      ///< in a step's `grows`
  preempted,  ///< in a step's `preempted`
  finished,   ///< in a step's `finished`: the request leaves
};

const char* state_name(req_state s);
const char* event_name(req_event e);

/// Where `e` takes a request: `legal` false when it may not happen in that state; `to` none when
/// the request leaves.
struct transition {
  bool legal = false;
  std::optional<req_state> to;
};

/// The table. `from` none: the engine has no such request (every event is illegal then).
transition next_state(std::optional<req_state> from, req_event e);

/// Why engine request `req` may not take `e` from `from`, in the words of the error reply
/// (docs/protocol.md, `step`: each list names its requests' refusal).
std::string refusal(uint64_t req, req_event e, std::optional<req_state> from);

}  // namespace kvtier::session
