#pragma once

// The server's front end actor: decodes each call, keeps every engine's requests apart (engine
// request ids map to the controller's own), checks each call against the request's state so
// that nothing an engine sends can break the controller, and forwards the block work to the
// cache controller as the scheduler would. Replies go to an outbox that the socket thread
// drains (server.hpp).

#include <chrono>
#include <cstdint>
#include <optional>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "caf/all.hpp"

#include "actors/device/cuda_device.hpp"
#include "actors/messages.hpp"
#include "observe/events/block_origins.hpp"
#include "serve/call.hpp"
#include "serve/observer.hpp"

namespace kvtier::serve {

class off_actor_lookups;

struct server_settings {
  std::string token;                   ///< empty: none required
  double client_timeout_s = 30;
  uint64_t max_message_bytes = 16u << 20;
  model_shape model;
  uint32_t block_size = 64;
  uint32_t layers = 1;
  uint32_t device_blocks = 0;
  uint32_t host_blocks = 0;
  bool storage = false;
  uint64_t storage_namespace = 0;
  uint64_t max_blocks_per_request = 1u << 20;
  double speed = 1.0;
  caf::actor_clock::time_point epoch{};
  std::vector<std::shared_ptr<serve_observer>> observers;
  /// Real mode (kvtier serve --backend cuda): the device whose copies run on the attached
  /// engine's tensors; null: the device is modelled and hello refuses `tensors`.
  std::shared_ptr<cuda_device> gpu;
  bool verify = false;  ///< real mode: computed blocks get their hash's pattern
  /// KV events on: where allocate remembers the engine's hashes of the blocks it names.
  block_origins* origins = nullptr;
  /// Lookups answered off the actor (serve.lookups=published): where engines are published.
  std::shared_ptr<off_actor_lookups> off_actor;
};

/// One call as the socket thread read it. It is decoded there, not on the actor's thread,
/// which also runs the cache controller: the block work is what that thread is for.
struct inbound_call {
  uint64_t conn = 0;
  std::chrono::steady_clock::time_point since;  ///< read off the socket: latencies start here
  uint64_t oversize = 0;             ///< not 0: the frame's size, beyond the limit (undecoded)
  std::optional<wire_error> error;   ///< the decoder's, when it failed
  call c;
};

/// Decodes one frame of `conn` read at `since` (a frame beyond `max_bytes` is left undecoded).
inbound_call read_call(uint64_t conn, const char* data, size_t size, uint64_t max_bytes,
                       std::chrono::steady_clock::time_point since);

/// A lookup the socket thread answered (serve/off_actor_lookups.hpp): what the actor counts.
struct answered_lookup {
  uint64_t engine = 0;
  std::chrono::steady_clock::time_point since;
  uint32_t prompt_blocks = 0;
  uint32_t device_blocks = 0;
  uint32_t host_blocks = 0;
  int64_t latency_ns = 0;
};

/// The calls one wake-up of the socket thread read, in arrival order: one actor message, so a
/// burst of calls costs the actor's thread one mailbox wake-up, not one each.
struct inbound_calls {
  std::vector<inbound_call> calls;
  std::vector<answered_lookup> answered;  ///< lookups answered off the actor meanwhile
};

/// Where replies go: (connection, encoded reply). Called on the actor's thread.
using reply_sink = std::function<void(uint64_t conn, std::string bytes)>;

/// Messages it takes: inbound_calls, calls in arrival order; (gpu_done_atom, transfer, slot, [device block, hash]...) real mode: a
/// swap-in was submitted and its slot's IPC events recorded; (run_atom) shutting down: it
/// releases every engine's requests and refuses new work, answered with the count released.
caf::actor spawn_server_actor(caf::actor_system& sys, server_settings settings,
                              cache_controller_actor controller, storage_actor storage,
                              reply_sink sink);

}  // namespace kvtier::serve

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvtier::serve::inbound_calls)
