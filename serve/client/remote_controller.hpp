#pragma once

// A cache controller that is `kvtier serve`: it takes the scheduler's messages (arrival, probe,
// commit, the router's prefix lookup) and forwards each as a protocol call, so that kvtier's own
// scheduler drives a live server exactly as it drives its own controller. `kvtier engine-sim`
// is the replay driver with this controller in place of the instance's. Its behaviour is a
// cache_controller_actor's, so the compiler checks that it answers every message of that
// interface (a preallocation, which the protocol lacks, with an error); its calls go through a
// socket thread (remote_link.hpp), so no handler waits on the socket. Its calls are the wire
// format's (serve/wire/call.hpp), its replies read by the wire format's decoders.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actors/device/engine_device.hpp"
#include "actors/messages.hpp"
#include "core/model_shape.hpp"
#include "core/sim_clock.hpp"
#include "model/session/device_owner.hpp"
#include "serve/client/client.hpp"

namespace kvtier::serve {

using session::device_owner;

struct remote_options {
  std::string endpoint;
  std::string token;
  curve_client_keys curve;  ///< CURVE to the server (empty: plaintext, loopback only)
  std::string engine_name = "engine-sim";
  model_shape model;  ///< the model this engine runs (hello)
  uint32_t block_size = 0;
  /// Real mode: the engine's tensors and events, exported in hello; each step's swap-in is
  /// handed to it (its compute waits on the slot's IPC events). Null: modelled compute.
  std::shared_ptr<engine_device> gpu;
  bool verify = false;  ///< real mode: the server must fill computed blocks with patterns
  device_owner owner = device_owner::kvtier;
  /// The config values the server must share, sent in hello (serve/server/shared_config.hpp).
  std::vector<std::pair<std::string, std::string>> shared;
  uint32_t device_blocks = 0;  ///< device_owner::engine: the engine's pool, its own allocator's
};

/// hello's `tensors` for an engine device.
attach_request tensors_of(const engine_device& gpu);

/// hello, with the engine's tensors in real mode; throws remote_error when the server refuses
/// (or, with `verify`, does not fill computed blocks with their patterns).
reply say_hello(client& link, const remote_options& o, const std::string& name);

/// Connects and says hello (throws remote_error on refusal, std::runtime_error if the server
/// does not answer); the actor then forwards every controller message. A call the server
/// refuses, or leaves unanswered for 60 s (a parked `wait` aside), ends the actor with an error.
cache_controller_actor spawn_remote_controller(caf::actor_system& sys, const remote_options& o,
                                               const sim_clock& clock);

}  // namespace kvtier::serve
