#pragma once

// KV events of `kvtier serve` (docs/events.md): the publisher, the sink that the cache
// controller reports to and the table of the engine's block hashes that the sink publishes under.
// Made before the actor system, so that it outlives the controller that holds its sink.
//
// A run's batch numbers start at its start time in nanoseconds since the Unix epoch, so they
// keep increasing across restarts, and its first batch is one AllBlocksCleared: a subscriber
// that follows the numbers sees a jump after a restart, asks the replay socket, and is told to
// drop what it held (docs/events.md, "Restarts").

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "model/cache/block_events.hpp"
#include "observe/events/block_origins.hpp"
#include "observe/events/event_publisher.hpp"

namespace kvtier {

struct serve_events_options {
  std::string endpoint;         ///< --events; empty: off
  events_socket socket = events_socket::bind;  ///< serve.events_socket
  std::string replay_endpoint;  ///< --events-replay; empty: no replay socket
  std::string topic;            ///< serve.events_topic, its placeholders filled in
  uint64_t buffer_batches = 10000;  ///< serve.events_buffer
  uint64_t hwm = 100000;            ///< serve.events_hwm
  event_layout layout = event_layout::map;  ///< serve.events_layout
  size_t idle_origins = 1u << 20;  ///< allocated blocks remembered before any turns ready
};

class serve_events {
 public:
  /// Binds the sockets when events are on; throws std::runtime_error naming the endpoint.
  explicit serve_events(const serve_events_options& options);
  ~serve_events();

  bool on() const { return publisher_ != nullptr; }
  /// The controller's sink (controller_options::events); null when off.
  block_event_sink* sink() { return sink_.get(); }
  /// Null when off.
  event_publisher* publisher() { return publisher_.get(); }
  /// The engine's hashes of the blocks the server names; null when off.
  block_origins* origins() { return origins_.get(); }
  /// The line the server prints once ready ("kvtier serve: events on ..."); empty when off.
  std::string ready_line() const;

 private:
  std::unique_ptr<event_publisher> publisher_;
  events_socket socket_ = events_socket::bind;
  std::unique_ptr<block_origins> origins_;
  std::unique_ptr<block_event_sink> sink_;
};

}  // namespace kvtier
