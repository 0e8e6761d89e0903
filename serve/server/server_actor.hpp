#pragma once

// The server's front end actors, one per controller stack (shards): each takes the calls the
// socket thread decoded for the engines on its stack, keeps their sessions
// (model/session/engine_session.hpp: the engine's request ids mapped onto the controller's, each
// request's state checked before anything reaches the controller, so that nothing an engine
// sends can break it), and forwards the block work to its stack's cache controller as the
// scheduler would. Replies go to an outbox that the socket thread drains (socket_loop.hpp).

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "caf/all.hpp"

#include "actors/device/cuda_device.hpp"
#include "actors/messages.hpp"
#include "core/run_modes.hpp"
#include "observe/events/block_origins.hpp"
#include "serve/server/engine_directory.hpp"
#include "serve/server/inbound_calls.hpp"
#include "serve/server/observe/observer.hpp"
#include "serve/server/off_actor_lookups.hpp"
#include "serve/server/shared_config.hpp"

namespace kvtier::serve {

struct server_settings {
  std::string token;                   ///< empty: none required
  double client_timeout_s = 30;
  uint64_t max_message_bytes = 16u << 20;
  model_shape model;
  uint32_t block_size = 64;
  /// The config an engine must share (hello's `config`; shared_config.hpp).
  config_values shared;
  uint32_t layers = 1;
  uint32_t device_blocks = 0;
  uint32_t host_blocks = 0;
  bool storage = false;
  uint64_t storage_namespace = 0;
  uint64_t max_blocks_per_request = 1u << 20;
  double speed = 1.0;
  caf::actor_clock::time_point epoch{};
  std::vector<std::shared_ptr<serve_observer>> observers;
  /// Real mode (kvtier serve --backend cuda or shm): the device whose copies run on the
  /// attached engine's tensors; null: the device is modelled and hello refuses `tensors`.
  std::shared_ptr<cuda_device> gpu;
  copy_backend_kind backend = copy_backend_kind::modelled;
  bool verify = false;  ///< real mode: computed blocks get their hash's pattern
  /// When the stacks' controllers do a step's tree work (the plan's controller options): with
  /// `after_reply`, each grant is followed by a tree_work message to its controller.
  tree_work_timing tree_work = tree_work_timing::in_step;
  /// KV events on: where allocate remembers the engine's hashes of the blocks it names.
  block_origins* origins = nullptr;
  /// Lookups answered off the actor (serve.lookups=published): where engines are published.
  std::shared_ptr<off_actor_lookups> off_actor;
  /// Connections the socket refused at the handshake (socket_loop::refused_connections).
  std::shared_ptr<const std::atomic<uint64_t>> refused_connections;
};

/// What every shard shares: every stack's controller, by stack; every shard's handle (filled
/// as they are spawned); the directory placing engines on stacks; storage; the replies' sink.
struct server_shared {
  std::vector<cache_controller_actor> controllers;
  std::shared_ptr<std::vector<caf::actor>> shards;
  std::shared_ptr<engine_directory> directory;
  storage_actor storage;
  reply_sink sink;
};

/// One server actor per controller stack (`controllers`, server_plan.hpp: one, or one per engine
/// slot), by stack; each serves the engines the socket thread places on its stack
/// (`directory`, made for as many stacks). Messages each takes: inbound_calls, calls in arrival
/// order; (gpu_done_atom, transfer, slot, record, [device block, hash]...) real mode (one stack):
/// a swap-in was submitted and its slot's IPC events recorded; (run_atom) shutting down: it
/// releases its engines' requests and refuses new work, answered with the count released;
/// (report_atom, get_atom) its part of `stats` (stats_part).
std::vector<caf::actor> spawn_server_shards(caf::actor_system& sys, const server_settings& settings,
                                            std::vector<cache_controller_actor> controllers,
                                            storage_actor storage, reply_sink sink,
                                            std::shared_ptr<engine_directory> directory);

}  // namespace kvtier::serve
