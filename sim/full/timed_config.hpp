#pragma once

// The settings of a timed replay, resolved from the config keys for each actor.

#include "actors/cache_controller/controller_core.hpp"
#include "actors/scheduler/scheduler.hpp"
#include "actors/storage/storage.hpp"
#include "actors/transfer_engine/transfer_engine.hpp"
#include "sim/config/replay_config.hpp"

namespace kvtier {

struct timed_config {
  cache_options cache;
  controller_options controller;
  scheduler_config scheduler;
  transfer_engine_options engine;
  storage_options storage;
  uint64_t block_bytes = 0;
};

timed_config resolve_timed(const config& c, const replay_config& rc);

}  // namespace kvtier
