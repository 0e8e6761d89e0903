#include "observe/events/event_publisher.hpp"

#include <cerrno>
#include <chrono>
#include <stdexcept>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "observe/events/event_encoding.hpp"

namespace kvtier {

namespace {

std::string big_endian(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; --i) {
    out[i] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  return out;
}

uint64_t from_big_endian(const zmq::message_t& m) {
  uint64_t v = 0;
  auto bytes = static_cast<const unsigned char*>(m.data());
  for (size_t i = 0; i < 8; ++i)
    v = (v << 8) | bytes[i];
  return v;
}

const std::string end_of_replay = big_endian(~uint64_t{0});  // -1, signed

void open_or_throw(zmq::socket_t& s, const std::string& endpoint, const char* what,
                   events_socket how = events_socket::bind) {
  try {
    if (how == events_socket::connect)
      s.connect(endpoint);
    else
      s.bind(endpoint);
  } catch (const zmq::error_t& e) {
    std::string text = std::string("cannot ") + to_string(how) + " the " + what
                       + " socket to '" + endpoint + "': " + e.what();
    // A taken address is the machine's state; anything else is a bad endpoint (bad input).
    if (e.num() == EADDRINUSE)
      throw std::runtime_error(text);
    throw std::invalid_argument(text);
  }
}

}  // namespace

const char* to_string(events_socket socket) {
  return socket == events_socket::bind ? "bind" : "connect";
}

std::optional<events_socket> events_socket_of(const std::string& name) {
  if (name == "bind")
    return events_socket::bind;
  if (name == "connect")
    return events_socket::connect;
  return std::nullopt;
}

std::string events_topic(const std::string& pattern, const std::string& pod,
                         const std::string& model) {
  std::string out;
  for (size_t i = 0; i < pattern.size();) {
    if (pattern[i] != '{') {
      out += pattern[i++];
      continue;
    }
    size_t end = pattern.find('}', i);
    std::string name = pattern.substr(i, end == std::string::npos ? std::string::npos
                                                                  : end - i + 1);
    if (name == "{pod}")
      out += pod;
    else if (name == "{model}")
      out += model;
    else
      throw std::invalid_argument("serve.events_topic '" + pattern + "': unknown placeholder '"
                                  + name + "' (known: {pod}, {model})");
    i += name.size();
  }
  return out;
}

struct event_publisher::sockets {
  zmq::context_t context{1};
  zmq::socket_t pub{context, zmq::socket_type::pub};
  zmq::socket_t replay{context, zmq::socket_type::router};
  zmq::socket_t wake_rx{context, zmq::socket_type::pair};
  zmq::socket_t wake_tx{context, zmq::socket_type::pair};
  bool has_replay = false;
};

event_publisher::event_publisher(const event_publisher_options& options)
  : options_(options), sockets_(std::make_unique<sockets>()), next_seq_(options.first_seq),
    sent_seq_(options.first_seq) {
  if (options_.buffer_batches == 0)
    throw std::runtime_error("the replay ring must keep at least one batch");
  auto& s = *sockets_;
  s.pub.set(zmq::sockopt::sndhwm, options_.hwm);
  s.pub.set(zmq::sockopt::linger, 0);
  open_or_throw(s.pub, options_.endpoint, "KV events", options_.socket);
  endpoint_ = options_.socket == events_socket::bind ? s.pub.get(zmq::sockopt::last_endpoint)
                                                     : options_.endpoint;
  if (!options_.replay_endpoint.empty()) {
    s.replay.set(zmq::sockopt::linger, 0);
    open_or_throw(s.replay, options_.replay_endpoint, "KV events replay");
    replay_endpoint_ = s.replay.get(zmq::sockopt::last_endpoint);
    s.has_replay = true;
  }
  // An inproc pair wakes the thread: it sleeps in poll() on it and the replay socket together.
  std::string wake = "inproc://kvtier-events-wake";
  s.wake_rx.bind(wake);
  s.wake_tx.connect(wake);
  thread_ = std::thread([this] { run(); });
}

event_publisher::~event_publisher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    sockets_->wake_tx.send(zmq::str_buffer("s"), zmq::send_flags::dontwait);
  }
  thread_.join();
}

std::optional<uint64_t> event_publisher::publish(const std::vector<block_event>& events) {
  return publish(with_unknown_tokens(events));
}

std::optional<uint64_t> event_publisher::publish(std::vector<published_event> events) {
  if (events.empty())
    return std::nullopt;
  double ts = std::chrono::duration<double>(
                std::chrono::system_clock::now().time_since_epoch()).count();
  std::lock_guard<std::mutex> lock(mutex_);
  uint64_t seq = next_seq_++;
  queue_.push_back({seq, ts, std::move(events)});
  if (queue_.size() == 1)  // else a wake-up is already pending
    sockets_->wake_tx.send(zmq::str_buffer("p"), zmq::send_flags::dontwait);
  return seq;
}

event_publisher_stats event_publisher::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void event_publisher::flush() {
  std::unique_lock<std::mutex> lock(mutex_);
  uint64_t target = next_seq_;
  sent_.wait(lock, [&] { return sent_seq_ >= target; });
}

void event_publisher::send_batch(queued& q) {
  auto& s = *sockets_;
  event_batch_header header{q.ts, options_.data_parallel_rank, options_.layout};
  std::string payload = encode_event_batch(header, q.events);
  std::string seq = big_endian(q.seq);
  s.pub.send(zmq::buffer(options_.topic), zmq::send_flags::sndmore);
  s.pub.send(zmq::buffer(seq), zmq::send_flags::sndmore);
  s.pub.send(zmq::buffer(payload), zmq::send_flags::none);
  size_t wire = wire_event_count(q.events);
  ring_.emplace_back(q.seq, std::move(payload));
  if (ring_.size() > options_.buffer_batches)
    ring_.pop_front();
  std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.batches;
  stats_.events += wire;
  sent_seq_ = q.seq + 1;
}

void event_publisher::serve_replays() {
  auto& s = *sockets_;
  for (;;) {
    std::vector<zmq::message_t> frames;
    auto got = zmq::recv_multipart(s.replay, std::back_inserter(frames), zmq::recv_flags::dontwait);
    if (!got)
      return;
    bool good = frames.size() == 3 && frames[1].size() == 0 && frames[2].size() == 8;
    uint64_t resent = 0;
    if (good) {
      uint64_t start = from_big_endian(frames[2]);
      for (const auto& [seq, payload] : ring_) {
        if (seq < start)
          continue;
        s.replay.send(zmq::buffer(frames[0].data(), frames[0].size()), zmq::send_flags::sndmore);
        s.replay.send(zmq::str_buffer(""), zmq::send_flags::sndmore);
        s.replay.send(zmq::buffer(big_endian(seq)), zmq::send_flags::sndmore);
        s.replay.send(zmq::buffer(payload), zmq::send_flags::none);
        ++resent;
      }
    }
    // A malformed request still ends with the end marker, so its sender does not wait forever.
    s.replay.send(zmq::buffer(frames[0].data(), frames[0].size()), zmq::send_flags::sndmore);
    s.replay.send(zmq::str_buffer(""), zmq::send_flags::sndmore);
    s.replay.send(zmq::buffer(end_of_replay), zmq::send_flags::sndmore);
    s.replay.send(zmq::str_buffer(""), zmq::send_flags::none);
    std::lock_guard<std::mutex> lock(mutex_);
    if (good) {
      ++stats_.replay_requests;
      stats_.replayed_batches += resent;
    } else {
      ++stats_.bad_replay_requests;
    }
  }
}

void event_publisher::run() {
  auto& s = *sockets_;
  std::vector<zmq::pollitem_t> items = {{s.wake_rx.handle(), 0, ZMQ_POLLIN, 0}};
  if (s.has_replay)
    items.push_back({s.replay.handle(), 0, ZMQ_POLLIN, 0});
  for (;;) {
    zmq::poll(items.data(), items.size(), std::chrono::milliseconds(-1));
    zmq::message_t drop;
    while (s.wake_rx.recv(drop, zmq::recv_flags::dontwait)) {
    }
    std::deque<queued> work;
    bool stop = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      work.swap(queue_);
      stop = stopping_;
    }
    for (queued& q : work)
      send_batch(q);
    if (!work.empty())
      sent_.notify_all();
    if (s.has_replay)
      serve_replays();
    if (stop)
      return;
  }
}

}  // namespace kvtier
