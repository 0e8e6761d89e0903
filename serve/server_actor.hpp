#pragma once

// The server's front end actor: decodes each call, keeps every engine's requests apart (engine
// request ids map to the controller's own), checks each call against the request's state so
// that nothing an engine sends can break the controller, and forwards the block work to the
// cache controller as the scheduler would. Replies go to an outbox that the socket thread
// drains (server.hpp).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "caf/all.hpp"

#include "actors/protocol.hpp"
#include "serve/call.hpp"
#include "serve/observer.hpp"

namespace kvtier::serve {

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
};

/// One call as the socket thread read it: its connection and its frame; a frame beyond
/// serve.max_message_bytes comes empty with its size instead (answered too_large, undecoded).
struct inbound_call {
  uint64_t conn = 0;
  std::string frame;
  uint64_t too_large_bytes = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, inbound_call& x) {
  return f(caf::meta::type_name("inbound_call"), x.conn, x.frame, x.too_large_bytes);
}

/// A reply: the connection it goes to and its encoded bytes.
using outbound_reply = std::pair<uint64_t, std::string>;

/// Where replies go, a batch at a time (every reply the actor made since the last batch).
/// Called on the actor's thread; the sink takes the replies out of the vector.
using reply_sink = std::function<void(std::vector<outbound_reply>& replies)>;

/// Registers the server actor's message types (add_kvtier_types registers the rest).
void add_serve_types(caf::actor_system_config& cfg);

/// Messages it takes: (std::vector<inbound_call>) every call the socket thread read in one
/// wake-up, handled in order; (run_atom) shutting down: it releases every engine's requests and
/// refuses new work, answered with the count released.
caf::actor spawn_server_actor(caf::actor_system& sys, server_settings settings,
                              cache_controller_actor controller, storage_actor storage,
                              reply_sink sink);

}  // namespace kvtier::serve

CAF_BEGIN_TYPE_ID_BLOCK(kvtier_serve, caf::id_block::kvtier::end)
  CAF_ADD_TYPE_ID(kvtier_serve, (kvtier::serve::inbound_call))
  CAF_ADD_TYPE_ID(kvtier_serve, (std::vector<kvtier::serve::inbound_call>))
CAF_END_TYPE_ID_BLOCK(kvtier_serve)
