#include "storage/redis_loop.hpp"

#include "storage/redis_dial.hpp"

#include <poll.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>

namespace kvtier {

void redis_backend::loop::wake() {
  uint64_t one = 1;
  ssize_t r = ::write(wake_fd, &one, sizeof(one));
  (void)r;
}

void redis_backend::loop::submit(std::shared_ptr<batch> b) {
  {
    std::lock_guard<std::mutex> guard(mutex);
    submitted.push_back(std::move(b));
  }
  wake();
}

// hiredis reads at most 16 KiB per call: while more has arrived, read on rather than poll again
// for each 16 KiB of a megabyte reply.
void redis_backend::loop::read_available(node& n) {
  reading = &n;
  for (int round = 0; round < 1024 && n.ctx; ++round) {
    redisAsyncHandleRead(n.ctx);
    int queued = 0;
    if (!n.ctx || ::ioctl(n.ctx->c.fd, FIONREAD, &queued) != 0 || queued <= 0)
      break;
  }
  reading = nullptr;
}

void redis_backend::loop::run() {
  std::vector<pollfd> fds;
  std::vector<node*> polled;
  for (;;) {
    std::deque<std::shared_ptr<batch>> todo;
    {
      std::lock_guard<std::mutex> guard(mutex);
      if (stopping)
        break;
      todo.swap(submitted);
    }
    for (auto& b : todo)
      dispatch(b);
    for (auto& n : nodes)
      pump(*n);
    int64_t now = now_ns();
    int64_t wait_ns = 50 * ms;
    for (auto& n : nodes) {
      if (!n->ctx && n->retry_at <= now)
        dial(*n);
      else if (!n->ctx)
        wait_ns = std::min(wait_ns, n->retry_at - now);
      if (n->ctx && n->pending > 0 && now - n->last_progress > op_timeout_ns) {
        redis_abandon(n->ctx->c.fd);
        redisAsyncFree(n->ctx);  // silent too long: down (its commands fail, cleanup runs)
      }
      else if (n->ctx && !n->connected && n->pending == 0 && now - n->dialled_ns > op_timeout_ns)
        redisAsyncFree(n->ctx);  // a connect that does not complete (a host that drops SYNs)
    }
    fds.clear();
    polled.clear();
    fds.push_back({wake_fd, POLLIN, 0});
    for (auto& n : nodes) {
      if (!n->ctx)
        continue;
      short ev = static_cast<short>((n->want_read ? POLLIN : 0) | (n->want_write ? POLLOUT : 0));
      fds.push_back({n->ctx->c.fd, ev, 0});
      polled.push_back(n.get());
    }
    int timeout_ms = static_cast<int>(std::max<int64_t>(1, wait_ns / ms));
    if (::poll(fds.data(), fds.size(), timeout_ms) <= 0)
      continue;
    if (fds[0].revents & POLLIN) {
      uint64_t drained;
      ssize_t r = ::read(wake_fd, &drained, sizeof(drained));
      (void)r;
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      node* n = polled[i - 1];
      short re = fds[i].revents;
      if (n->ctx && (re & (POLLIN | POLLERR | POLLHUP)))
        read_available(*n);
      if (n->ctx && (re & POLLOUT))
        redisAsyncHandleWrite(n->ctx);
      pump(*n);
    }
  }
  // Stopping: every connection goes; commands still out complete as failures.
  for (auto& n : nodes)
    if (n->ctx)
      redisAsyncFree(n->ctx);
  for (auto& n : nodes)
    pump(*n);  // no connection: what still waits fails
  std::deque<std::shared_ptr<batch>> left;
  {
    std::lock_guard<std::mutex> guard(mutex);
    left.swap(submitted);
  }
  for (auto& b : left)
    dispatch(b);  // no connections: answers at once
}

}  // namespace kvtier
