#pragma once

// The serve.* config keys: the live controller, kvtier serve (docs/protocol.md, docs/events.md).
// Read by serve/server/server.cpp and serve/server/observe_wiring.cpp.
// Each key is a named constant, so a misspelled key is a compile error; its type, range and
// meaning are its row in serve_keys.cpp.

#include <vector>

#include "runtime/config/option_spec.hpp"

namespace kvtier {

namespace keys::serve {

inline constexpr number_key client_timeout_s{"serve.client_timeout_s"};
inline constexpr integer_key max_message_bytes{"serve.max_message_bytes"};
inline constexpr text_key events_topic{"serve.events_topic"};
inline constexpr integer_key events_buffer{"serve.events_buffer"};
inline constexpr integer_key events_hwm{"serve.events_hwm"};
inline constexpr text_key events_layout{"serve.events_layout"};
inline constexpr text_key events_socket{"serve.events_socket"};
inline constexpr text_key lookups{"serve.lookups"};
inline constexpr text_key controller_stacks{"serve.controller_stacks"};
inline constexpr integer_key engine_slots{"serve.engine_slots"};
inline constexpr integer_key io_threads{"serve.io_threads"};

}  // namespace keys::serve

/// The serve.* rows of the options table, in the order `kvtier config` lists them.
std::vector<option_spec> serve_key_specs();

}  // namespace kvtier
