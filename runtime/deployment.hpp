#pragma once

// What every front end does to run kvtier's actors for real: the actor system's configuration on
// the wall clock and the storage backend made before the clock starts. Used by wall-clock
// replays (sim/full/full_replay.cpp) and by `kvtier serve` (serve/server.cpp).

#include <cstddef>

#include "caf/actor_system_config.hpp"

#include "runtime/config/timed_config.hpp"

namespace kvtier {

/// A CAF config for actors on the wall clock (replays and `kvtier serve`): `threads` workers
/// that, when idle, spin briefly and then wait on their condition variable, quiet logging, and
/// kvtier's message types.
void configure_wall_clock(caf::actor_system_config& cfg, size_t threads);

/// Makes the byte-carrying storage backend `config.storage_backend` names (connections opened,
/// directories made) before the clock starts, and sizes the engine's payloads; nothing for
/// `model`. Throws config_error naming what is wrong. Used by replays and `kvtier serve`.
void prepare_storage(timed_config& config);

}  // namespace kvtier
