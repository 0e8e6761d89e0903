#include "serve/client/remote_link.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <vector>

#include "core/check.hpp"
#include "serve/wire/call.hpp"

namespace kvtier::serve {

remote_link::remote_link(std::shared_ptr<client> link, cache_controller_actor owner)
  : link_(std::move(link)),
    owner_(caf::actor_cast<caf::weak_actor_ptr>(owner)),
    token_(link_->token()),
    engine_(link_->engine()),
    wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (wake_fd_ < 0)
    throw std::runtime_error("eventfd failed");
  thread_ = std::thread([this] { run(); });
}

remote_link::~remote_link() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
  }
  wake();
  thread_.join();
  ::close(wake_fd_);
}

uint64_t remote_link::send(serve::call c) {
  uint64_t id = next_id_++;
  KVTIER_ASSERT(id != 0 && id != broken);
  c.id = id;
  c.token = token_.empty() ? std::nullopt : std::optional<std::string>(token_);
  c.engine = engine_ == 0 ? std::nullopt : std::optional<uint64_t>(engine_);
  encode_call(buf_, c);
  {
    std::lock_guard<std::mutex> guard(mutex_);
    outgoing_.emplace_back(buf_.data(), buf_.size());
  }
  wake();
  return id;
}

std::optional<reply> remote_link::take(uint64_t id) {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = inbox_.find(id);
  if (it == inbox_.end())
    return std::nullopt;
  reply r = std::move(it->second);
  inbox_.erase(it);
  return r;
}

std::string remote_link::failure() {
  std::lock_guard<std::mutex> guard(mutex_);
  return failure_;
}

void remote_link::post(uint64_t id) {
  if (auto strong = caf::actor_cast<caf::strong_actor_ptr>(owner_))
    caf::anon_send(caf::actor_cast<cache_controller_actor>(strong), wake_atom_v, id);
}

void remote_link::wake() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
}

// A socket that fails ends the link: the actor is told, not the process.
void remote_link::run() {
  try {
    serve_socket();
  } catch (const std::exception& e) {
    {
      std::lock_guard<std::mutex> guard(mutex_);
      failure_ = std::string("the link to the server failed: ") + e.what();
    }
    post(broken);
  }
}

// Sleeps in one poll on the socket and the eventfd; sends what the actor queued, posts what
// the server answered. Once stopping, it leaves after sending the last calls (the socket's
// linger lets them go).
void remote_link::serve_socket() {
  zmq::pollitem_t items[] = {{link_->socket_handle(), 0, ZMQ_POLLIN, 0},
                             {nullptr, wake_fd_, ZMQ_POLLIN, 0}};
  std::vector<std::string> batch;
  for (;;) {
    try {
      zmq::poll(items, 2, std::chrono::milliseconds(-1));
    } catch (const zmq::error_t& e) {
      if (e.num() != EINTR)
        throw;
      continue;
    }
    if (items[1].revents & ZMQ_POLLIN) {
      uint64_t count;
      [[maybe_unused]] ssize_t n = ::read(wake_fd_, &count, sizeof(count));
    }
    bool stop = false;
    {
      std::lock_guard<std::mutex> guard(mutex_);
      batch.assign(std::make_move_iterator(outgoing_.begin()),
                   std::make_move_iterator(outgoing_.end()));
      outgoing_.clear();
      stop = stopping_;
    }
    for (const std::string& bytes : batch)
      link_->send_raw(bytes);
    if (stop)
      return;
    while (std::optional<reply> r = link_->next(std::chrono::milliseconds(0))) {
      uint64_t id = r->id();
      {
        std::lock_guard<std::mutex> guard(mutex_);
        inbox_.insert_or_assign(id, std::move(*r));
      }
      post(id);
    }
  }
}

}  // namespace kvtier::serve
