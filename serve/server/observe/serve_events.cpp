#include "serve/server/observe/serve_events.hpp"

#include <chrono>

#include "observe/events/publishing_sink.hpp"

namespace kvtier {

serve_events::serve_events(const serve_events_options& options) {
  if (options.endpoint.empty())
    return;
  event_publisher_options o;
  o.endpoint = options.endpoint;
  o.socket = options.socket;
  o.replay_endpoint = options.replay_endpoint;
  o.topic = options.topic;
  o.buffer_batches = options.buffer_batches;
  o.hwm = static_cast<int>(options.hwm);
  o.layout = options.layout;
  o.first_seq = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                        std::chrono::system_clock::now().time_since_epoch())
                                        .count());
  publisher_ = std::make_unique<event_publisher>(o);
  socket_ = o.socket;
  origins_ = std::make_unique<block_origins>(options.idle_origins);
  sink_ = std::make_unique<publishing_sink>(*publisher_, origins_.get());
  // Whatever a subscriber held of an earlier run is gone.
  sink_->cleared();
  sink_->batch_end();
}

serve_events::~serve_events() = default;

std::string serve_events::ready_line() const {
  if (!publisher_)
    return {};
  std::string line = socket_ == events_socket::connect
                       ? "kvtier serve: events to " + publisher_->endpoint() + " (connecting)"
                       : "kvtier serve: events on " + publisher_->endpoint();
  if (!publisher_->replay_endpoint().empty())
    line += ", replay on " + publisher_->replay_endpoint();
  return line;
}

}  // namespace kvtier
