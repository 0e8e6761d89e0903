#include "serve/server/socket_loop.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <iostream>
#include <mutex>

#include "core/check.hpp"
#include "runtime/config/options.hpp"
#include "serve/server/off_actor_lookups.hpp"
#include "serve/server/stop_signals.hpp"
#include "serve/wire/curve.hpp"
#include "serve/wire/error_reply.hpp"

namespace kvtier::serve {

// Replies the actor leaves for the socket thread. The actor writes the eventfd only when the
// socket thread is about to sleep, or sleeps: awake, it looks at the box before it polls again.
// (Written for every reply into an empty box, the eventfd took 6% of the actors' thread and woke
// the socket thread for replies it had already sent.)
class outbox {
 public:
  outbox() : fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (fd < 0)
      throw std::runtime_error("eventfd failed");
  }
  ~outbox() { ::close(fd); }
  outbox(const outbox&) = delete;
  outbox& operator=(const outbox&) = delete;

  void push(uint64_t conn, std::string bytes) {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      items_.emplace_back(conn, std::move(bytes));
    }
    if (sleeping.exchange(false))
      wake();
  }
  void wake() {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(fd, &one, sizeof(one));
  }
  /// The socket thread, before it polls: false if a reply is waiting (then it must not sleep).
  bool may_sleep() {
    sleeping = true;
    std::lock_guard<std::mutex> guard(mutex_);
    if (items_.empty())
      return true;
    sleeping = false;
    return false;
  }
  /// Moves every waiting reply into `out` (cleared first).
  void take(std::vector<std::pair<uint64_t, std::string>>& out) {
    out.clear();
    std::lock_guard<std::mutex> guard(mutex_);
    while (!items_.empty()) {
      out.push_back(std::move(items_.front()));
      items_.pop_front();
    }
  }

  const int fd;
  std::atomic<bool> sleeping{false};

 private:
  std::mutex mutex_;
  std::deque<std::pair<uint64_t, std::string>> items_;
};

socket_loop::socket_loop(const std::string& endpoint, uint64_t max_message_bytes,
                         const socket_security& security, int io_threads)
  : max_bytes_(max_message_bytes), context_(io_threads),
    router_(context_, zmq::socket_type::router),
    monitor_(context_, zmq::socket_type::pair) {
  if (!security.curve_secret.empty() && !security.curve_clients.empty())
    gate_ = std::make_unique<curve_gate>(context_, security.curve_clients);
  router_.set(zmq::sockopt::linger, 0);
  router_.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(max_bytes_ * 4 + 1024));
  router_.set(zmq::sockopt::rcvhwm, 100000);
  router_.set(zmq::sockopt::sndhwm, 100000);
  if (!security.curve_secret.empty())
    make_curve_server(router_, security.curve_secret);
  // Every failed handshake is counted: a plaintext client of a CURVE socket, a wrong server key,
  // a client key the gate refused, a peer that is not ZeroMQ at all.
  std::string watch = "inproc://kvtier-serve-monitor";
  if (zmq_socket_monitor(router_.handle(), watch.c_str(),
                         ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                           ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) != 0)
    throw std::runtime_error("zmq_socket_monitor failed");
  monitor_.set(zmq::sockopt::linger, 0);
  monitor_.connect(watch);
  try {
    router_.bind(endpoint);
  } catch (const zmq::error_t& e) {
    if (e.num() == EADDRINUSE)
      throw std::runtime_error("--bind " + endpoint + ": address in use");
    throw config_error("--bind " + endpoint + ": " + e.what());
  }
  bound_ = router_.get(zmq::sockopt::last_endpoint);
  box_ = std::make_shared<outbox>();
  items_[0] = {router_.handle(), 0, ZMQ_POLLIN, 0};
  items_[1] = {nullptr, box_->fd, ZMQ_POLLIN, 0};
  items_[2] = {monitor_.handle(), 0, ZMQ_POLLIN, 0};
}

socket_loop::~socket_loop() = default;

reply_sink socket_loop::sink() const {
  return [box = box_](uint64_t conn, std::string bytes) { box->push(conn, std::move(bytes)); };
}

int socket_loop::run(caf::scoped_actor& self, const std::vector<caf::actor>& shards,
                     engine_directory& directory,
                     const std::vector<cache_controller_actor>& controllers) {
  KVTIER_ASSERT(!shards.empty() && shards.size() == directory.stacks());
  inbound_.assign(shards.size(), inbound_calls{});
  set_stop_wake_fd(box_->fd);
  bool stopping = false;
  int code = 0;
  for (;;) {
    wait_for_work(stopping);
    flush_outbox();
    if (items_[0].revents & ZMQ_POLLIN) {
      read_calls(directory);
      hand_over(shards);
    }
    if (stop_requested() && !stopping) {
      stopping = true;
      deadline_ = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      for (const caf::actor& shard : shards)
        self->request(shard, caf::infinite, run_atom_v)
          .receive([](uint64_t) {}, [](const caf::error&) {});
    }
    if (stopping && stopped(self, controllers, code))
      break;
  }
  set_stop_wake_fd(-1);
  return code;
}

// Sleeps in the poll unless a reply waits; while stopping, wakes every 5 ms to look at the
// controller.
void socket_loop::wait_for_work(bool stopping) {
  try {
    bool may_sleep = box_->may_sleep();
    zmq::poll(items_, 3, std::chrono::milliseconds(!may_sleep ? 0 : stopping ? 5 : -1));
    box_->sleeping = false;
  } catch (const zmq::error_t& e) {
    box_->sleeping = false;
    if (e.num() != EINTR)
      throw;
    items_[0].revents = items_[1].revents = items_[2].revents = 0;
  }
  if (items_[2].revents & ZMQ_POLLIN)
    read_monitor();
  if (items_[1].revents & ZMQ_POLLIN) {
    uint64_t count;
    [[maybe_unused]] ssize_t n = ::read(box_->fd, &count, sizeof(count));
  }
}

// The monitor's events: two frames each (event and value, then the peer's endpoint).
void socket_loop::read_monitor() {
  for (;;) {
    zmq::message_t event, where;
    if (!monitor_.recv(event, zmq::recv_flags::dontwait))
      return;
    if (event.more())
      (void)monitor_.recv(where, zmq::recv_flags::dontwait);
    ++*refused_;
  }
}

void socket_loop::flush_outbox() {
  for (;;) {
    box_->take(batch_);
    if (batch_.empty())
      return;
    for (auto& [conn, bytes] : batch_) {
      // The actor answers each call it was handed once: a reply beyond them is a fault.
      auto u = unanswered_.find(conn);
      KVTIER_ASSERT(u != unanswered_.end() && u->second > 0);
      --u->second;
      if (auto it = envelopes_.find(conn); it != envelopes_.end())
        send_to(it->second, bytes);
    }
  }
}

// A client gone meanwhile: ROUTER drops what cannot be routed.
void socket_loop::send_to(const envelope& env, const std::string& bytes) {
  router_.send(zmq::buffer(env.identity), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
  if (env.delimiter)
    router_.send(zmq::const_buffer(nullptr, 0),
                 zmq::send_flags::sndmore | zmq::send_flags::dontwait);
  router_.send(zmq::buffer(bytes), zmq::send_flags::dontwait);
}

// The shard a decoded call goes to: a hello's engine is placed on a stack now (and its
// connection's later calls follow it there); any other call goes where its connection's engines
// are, or to shard 0 from a connection that has said no hello (ping, stats, attach, or an error
// to answer). A placed connection keeps its stack: a later hello decoded by its shard joins it
// there (engine_directory::join). With one stack there is nothing to place: its shard joins
// each hello to it.
uint32_t socket_loop::shard_of(inbound_call& in, engine_directory& directory) {
  if (inbound_.size() == 1)
    return 0;
  if (in.c.op == verb::hello && in.oversize == 0 && !in.error) {
    uint32_t stack = directory.place(in.conn, in.c.name);
    in.placed = stack;
    shard_of_conn_[in.conn] = stack;
    return stack;
  }
  auto it = shard_of_conn_.find(in.conn);
  return it == shard_of_conn_.end() ? 0 : it->second;
}

// Reads every call waiting on the socket (at most 256 per wake-up), and decodes those no shard
// decodes itself.
void socket_loop::read_calls(engine_directory& directory) {
  for (int budget = 0; budget < 256; ++budget) {
    frames_.clear();
    zmq::message_t part;
    if (!router_.recv(part, zmq::recv_flags::dontwait))
      return;
    frames_.push_back(std::move(part));
    while (frames_.back().more()) {
      zmq::message_t next;
      if (!router_.recv(next, zmq::recv_flags::dontwait))
        break;
      frames_.push_back(std::move(next));
    }
    envelope env;
    env.identity = frames_.front().to_string();
    // [identity, body] (DEALER) or [identity, "", body] (REQ); anything else is not a call.
    bool shape_ok = frames_.size() == 2 || (frames_.size() == 3 && frames_[1].size() == 0);
    env.delimiter = frames_.size() == 3 && shape_ok;
    if (!shape_ok) {
      send_to(env, encode_error(0, "malformed", "a call is one frame (after a REQ socket's "
                                                "empty delimiter); got " +
                                                  std::to_string(frames_.size() - 1)));
      continue;
    }
    const zmq::message_t& body = frames_.back();
    auto [it, fresh] = conn_of_.try_emplace(env.identity, next_conn_);
    uint64_t conn = it->second;
    if (fresh) {  // a connection's identity and shape stay
      ++next_conn_;
      envelopes_[conn] = env;
    }
    auto now = std::chrono::steady_clock::now();
    bool shards_decode = inbound_.size() > 1 && !off_actor_;
    auto placed = shards_decode ? shard_of_conn_.find(conn) : shard_of_conn_.end();
    if (placed != shard_of_conn_.end()) {
      // Its shard decodes it: every frame of a placed connection goes there, so that its
      // calls stay in order (inbound_calls.hpp). With one shard the socket thread decodes:
      // beside the one worker, it is the idler thread.
      std::shared_ptr<undecoded_frames>& u = inbound_[placed->second].undecoded;
      if (!u)
        u = std::make_shared<undecoded_frames>();
      u->conns.push_back(conn);
      u->since.push_back(now);
      u->frames.push_back(std::move(frames_.back()));
      ++unanswered_[conn];
      continue;
    }
    inbound_call in = read_call(conn, body.data<char>(), body.size(), max_bytes_, now);
    if (answered_here(env, in))
      continue;
    ++unanswered_[in.conn];
    uint32_t shard = shard_of(in, directory);
    inbound_[shard].calls.push_back(std::move(in));
  }
}

// A lookup that need not queue behind the actor's block work (off_actor_lookups.hpp).
bool socket_loop::answered_here(const envelope& env, const inbound_call& in) {
  if (!off_actor_ || in.c.op != verb::lookup || stop_requested())
    return false;
  if (auto u = unanswered_.find(in.conn); u != unanswered_.end() && u->second > 0)
    return false;
  answered_lookup record;
  std::optional<std::string> bytes = off_actor_->try_answer(in, record);
  if (!bytes)
    return false;
  send_to(env, *bytes);
  record.latency_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - in.since)
                        .count();
  auto shard = shard_of_conn_.find(in.conn);  // a registered engine's: its hello placed it
  inbound_[shard == shard_of_conn_.end() ? 0 : shard->second].answered.push_back(record);
  return true;
}

// One message per shard and wake-up: a burst of calls costs a shard's thread one mailbox
// wake-up.
void socket_loop::hand_over(const std::vector<caf::actor>& shards) {
  for (size_t k = 0; k < shards.size(); ++k) {
    inbound_calls& in = inbound_[k];
    if (in.calls.empty() && in.answered.empty() && !in.undecoded)
      continue;
    caf::anon_send(shards[k], std::move(in));
    in = {};
  }
}

// In-flight copies finish: a controller is idle once every transfer it issued has landed.
bool socket_loop::stopped(caf::scoped_actor& self,
                          const std::vector<cache_controller_actor>& controllers, int& code) {
  bool idle = true;
  for (const cache_controller_actor& controller : controllers)
    self->request(controller, caf::infinite, caf::get_atom_v)
      .receive([&](bool y) { idle = idle && y; }, [&](const caf::error&) {});
  if (!idle && std::chrono::steady_clock::now() <= deadline_)
    return false;
  if (!idle) {
    std::cerr << "kvtier serve: copies still in flight after 30 s; stopping anyway\n";
    code = 1;
  }
  flush_outbox();
  return true;
}

}  // namespace kvtier::serve
