#include "serve/observe/serve_events.hpp"

#include "observe/events/publishing_sink.hpp"

namespace kvtier {

serve_events::serve_events(const serve_events_options& options) {
  if (options.endpoint.empty())
    return;
  event_publisher_options o;
  o.endpoint = options.endpoint;
  o.replay_endpoint = options.replay_endpoint;
  o.topic = options.topic;
  o.buffer_batches = options.buffer_batches;
  o.hwm = static_cast<int>(options.hwm);
  publisher_ = std::make_unique<event_publisher>(o);
  sink_ = std::make_unique<publishing_sink>(*publisher_);
}

serve_events::~serve_events() = default;

std::string serve_events::ready_line() const {
  if (!publisher_)
    return {};
  std::string line = "kvtier serve: events on " + publisher_->endpoint();
  if (!publisher_->replay_endpoint().empty())
    line += ", replay on " + publisher_->replay_endpoint();
  return line;
}

}  // namespace kvtier
