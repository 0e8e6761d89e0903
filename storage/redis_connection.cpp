#include "storage/redis_loop.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>
#include <tuple>

namespace kvtier {

redis_backend::loop::loop(const backend_options& o) : options(o) {
  wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd < 0)
    throw std::runtime_error("storage.redis: eventfd failed");
  for (uint32_t i = 0; i < o.redis.size(); ++i) {
    auto n = std::make_unique<node>();
    n->owner = this;
    n->index = i;
    std::tie(n->host, n->port) = parse_redis_address(o.redis[i]);
    nodes.push_back(std::move(n));
  }
}

redis_backend::loop::~loop() {
  if (wake_fd >= 0)
    ::close(wake_fd);
}

// Called whenever hiredis frees a context (error, disconnect, our free): the node is down.
void redis_backend::loop::cleanup(void* p) {
  node* n = static_cast<node*>(p);
  n->ctx = nullptr;
  n->want_read = n->want_write = false;
  if (n->up)
    ++n->owner->node_downs;
  n->connected = false;
  n->up = false;
  n->pending = 0;
  n->retry_at = now_ns() + n->backoff_ns;
  n->backoff_ns = std::min(n->backoff_ns * 2, max_backoff_ns);
}

void redis_backend::loop::on_connect(const redisAsyncContext* c, int status) {
  node* n = static_cast<node*>(c->data);
  if (status != REDIS_OK)
    return;  // hiredis frees the context next: cleanup() marks the node down
  if (n->ever_connected)
    ++n->owner->reconnects;
  n->connected = n->ever_connected = true;
  n->up = true;
  n->backoff_ns = first_backoff_ns;
  n->last_progress = now_ns();
}

void redis_backend::loop::dial(node& n) {
  redisAsyncContext* c = redisAsyncConnect(n.host.c_str(), n.port);
  if (!c)
    return;
  if (c->err) {
    redisAsyncFree(c);
    n.retry_at = now_ns() + n.backoff_ns;
    n.backoff_ns = std::min(n.backoff_ns * 2, max_backoff_ns);
    return;
  }
  n.ctx = c;
  c->data = &n;
  c->ev.data = &n;
  c->ev.addRead = add_read;
  c->ev.delRead = del_read;
  c->ev.addWrite = add_write;
  c->ev.delWrite = del_write;
  c->ev.cleanup = cleanup;
  c->c.reader->fn = &reader_functions;
  c->c.reader->maxbuf = 0;  // keep the input buffer: it grows to a part's size once, not per part
  redisAsyncSetConnectCallback(c, on_connect);  // after the hooks: it asks for a write event
  redisAsyncSetDisconnectCallback(c, on_disconnect);
}

}  // namespace kvtier
