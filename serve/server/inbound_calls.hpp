#pragma once

// What the socket thread (socket_loop.hpp) hands the server actor, and what the actor hands back:
// the calls one wake-up read, decoded there, and the lookups answered off the actor meanwhile
// (off_actor_lookups.hpp); the replies go the other way through a reply_sink.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <zmq.hpp>

#include "caf/all.hpp"

#include "serve/wire/call.hpp"

namespace kvtier::serve {

/// One call as the socket thread decoded it.
struct inbound_call {
  uint64_t conn = 0;
  std::chrono::steady_clock::time_point since;  ///< read off the socket: latencies start here
  uint64_t oversize = 0;             ///< not 0: the frame's size, beyond the limit (undecoded)
  std::optional<wire_error> error;   ///< the decoder's, when it failed
  /// A hello: the stack the socket thread placed its engine on (engine_directory::place), whose
  /// shard it goes to; the shard cancels the place when it registers no engine.
  std::optional<uint32_t> placed;
  call c;
};

/// Decodes one frame of `conn` read at `since` (a frame beyond `max_bytes` is left undecoded).
inbound_call read_call(uint64_t conn, const char* data, size_t size, uint64_t max_bytes,
                       std::chrono::steady_clock::time_point since);
/// Frames a shard decodes itself, as ZeroMQ received them (not copied), in arrival order. With
/// several shards, every frame of a connection whose engines a hello placed goes to its shard
/// this way (the shards decode side by side; the one socket thread would otherwise decode
/// every engine's calls). The socket thread decodes every other call, every call when lookups
/// are answered off the actor (it must see hellos and lookups), and every call of a one-stack
/// server (whose one worker runs the block work).
struct undecoded_frames {
  std::vector<uint64_t> conns;
  std::vector<std::chrono::steady_clock::time_point> since;
  std::vector<zmq::message_t> frames;
  size_t size() const { return frames.size(); }
};

/// A lookup the socket thread answered (off_actor_lookups.hpp): what the actor counts.
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
  /// Frames to decode (null: none). A connection's frames go undecoded only once its hello has
  /// placed it, so any of its `calls` came before them: taking `calls` first keeps each
  /// connection's order.
  std::shared_ptr<undecoded_frames> undecoded;
};

/// Where replies go: (connection, encoded reply). Called on the shards' threads.
using reply_sink = std::function<void(uint64_t conn, std::string bytes)>;

}  // namespace kvtier::serve

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(kvtier::serve::inbound_calls)
