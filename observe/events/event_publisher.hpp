#pragma once

// Publishes KV event batches on a ZeroMQ PUB socket with the framing of vLLM's kv_events:
// [topic, 8-byte big-endian sequence number, msgpack EventBatch], numbers from `first_seq`, one
// per batch.
// A ROUTER socket beside it answers replay requests from a bounded ring of the latest batches:
// a request [empty, 8-byte start] gets [empty, seq, payload] for every kept batch from `start`
// on, then [empty, -1 as 8 bytes, empty]. A subscriber that sees a gap asks for it; if the ring
// no longer holds the start, the first replayed number is above it, which tells the subscriber
// that it lost events (docs/events.md).
//
// The PUB socket binds (subscribers connect, as vLLM's own subscribers do) or connects to a
// subscriber that binds (llm-d's KV cache manager binds tcp://*:5557 and waits for engines); the
// replay socket always binds.
//
// publish() only queues: one thread of the publisher's own owns both sockets, encodes, sends and
// serves replays, so the caller (the cache controller's thread) never waits on the network.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "model/cache/block_events.hpp"
#include "observe/events/event_encoding.hpp"

namespace kvtier {

/// Whether the PUB socket binds its endpoint or connects to it (serve.events_socket).
enum class events_socket : uint8_t { bind, connect };

/// "bind" or "connect": the spelling of serve.events_socket.
const char* to_string(events_socket socket);
std::optional<events_socket> events_socket_of(const std::string& name);

/// serve.events_topic with its placeholders filled in: `{pod}` by `pod` (this machine's host
/// name), `{model}` by the model's name; the default "kv@{pod}@{model}" is the topic llm-d's
/// subscriber parses (docs/events.md). Throws std::invalid_argument naming any other `{...}`.
std::string events_topic(const std::string& pattern, const std::string& pod,
                         const std::string& model);

struct event_publisher_options {
  std::string endpoint;           ///< PUB socket: tcp://127.0.0.1:5557, tcp://127.0.0.1:* ...
  events_socket socket = events_socket::bind;  ///< bind `endpoint`, or connect to it
  std::string replay_endpoint;    ///< ROUTER socket, bound; empty: no replay socket
  std::string topic;              ///< the first frame of every batch
  size_t buffer_batches = 10000;  ///< batches kept for replay
  int hwm = 100000;               ///< PUB high-water mark (messages queued per subscriber)
  std::optional<int64_t> data_parallel_rank = 0;
  event_layout layout = event_layout::map;
  uint64_t first_seq = 0;  ///< the first batch's number (kvtier serve: its start time, in ns)
};

struct event_publisher_stats {
  uint64_t batches = 0;           ///< batches published
  uint64_t events = 0;            ///< wire events in them
  uint64_t replay_requests = 0;   ///< well-formed replay requests served
  uint64_t replayed_batches = 0;  ///< batches resent through replay
  uint64_t bad_replay_requests = 0;
};

class event_publisher {
 public:
  /// Binds (or connects) the PUB socket and binds the replay socket. An endpoint that cannot be
  /// used throws, naming it: std::runtime_error when the address is taken,
  /// std::invalid_argument when the endpoint itself is bad.
  explicit event_publisher(const event_publisher_options& options);
  /// Sends what is queued, then closes the sockets.
  ~event_publisher();
  event_publisher(const event_publisher&) = delete;
  event_publisher& operator=(const event_publisher&) = delete;

  /// Queues one batch and returns its sequence number; an empty batch is not sent (nullopt).
  std::optional<uint64_t> publish(std::vector<published_event> events);
  /// The same, for events whose tokens are unknown.
  std::optional<uint64_t> publish(const std::vector<block_event>& events);
  /// The bound addresses (a wildcard port resolved); connected: the endpoint as given.
  const std::string& endpoint() const { return endpoint_; }
  const std::string& replay_endpoint() const { return replay_endpoint_; }
  event_publisher_stats stats() const;
  /// Blocks until every batch queued so far has been sent (tests, shutdown).
  void flush();

 private:
  struct queued {
    uint64_t seq = 0;
    double ts = 0;
    std::vector<published_event> events;
  };
  struct sockets;
  void run();
  void send_batch(queued& q);
  void serve_replays();

  event_publisher_options options_;
  std::unique_ptr<sockets> sockets_;
  std::string endpoint_;
  std::string replay_endpoint_;
  mutable std::mutex mutex_;
  std::condition_variable sent_;
  std::deque<queued> queue_;
  uint64_t next_seq_ = 0;
  uint64_t sent_seq_ = 0;  // batches sent (all below it)
  bool stopping_ = false;
  std::deque<std::pair<uint64_t, std::string>> ring_;  // publisher thread only
  event_publisher_stats stats_;
  std::thread thread_;
};

}  // namespace kvtier
