#include "storage/redis_loop.hpp"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>
#include <tuple>

#include "storage/redis_dial.hpp"
#include "storage/redis_tls.hpp"

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

// The connection is usable: commands waiting for it go out.
void redis_backend::loop::ready(node& n) {
  if (n.ever_connected)
    ++n.owner->reconnects;
  n.connected = n.ever_connected = true;
  n.up = true;
  n.backoff_ns = first_backoff_ns;
  n.last_progress = now_ns();
  std::lock_guard<std::mutex> guard(n.owner->error_mutex);
  n.refusal.clear();
}

void redis_backend::loop::on_connect(const redisAsyncContext* c, int status) {
  node* n = static_cast<node*>(c->data);
  if (status != REDIS_OK)
    return;  // hiredis frees the context next: cleanup() marks the node down
  // AUTH (PING without a password) before anything else: the node is up only once it answered,
  // so no command is sent to a server that will refuse it, or through a TLS relay that could
  // not reach it.
  const redis_access& a = n->owner->options.redis_auth;
  std::vector<const char*> argv = {a.authenticates() ? "AUTH" : "PING"};
  std::vector<size_t> len = {4};  // "AUTH" or "PING"
  if (a.authenticates()) {
    if (!a.user.empty()) {
      argv.push_back(a.user.data());
      len.push_back(a.user.size());
    }
    argv.push_back(a.password.data());
    len.push_back(a.password.size());
  }
  auto* ctx = const_cast<redisAsyncContext*>(c);
  if (redisAsyncCommandArgv(ctx, on_handshake, n, static_cast<int>(argv.size()), argv.data(),
                            len.data()) == REDIS_OK) {
    ++n->pending;
    n->last_progress = now_ns();
  }
}

void redis_backend::loop::on_handshake(redisAsyncContext* c, void* r, void* priv) {
  node* n = static_cast<node*>(priv);
  auto* reply = static_cast<redisReply*>(r);
  if (n->pending > 0)
    --n->pending;
  if (reply && reply->type == REDIS_REPLY_STATUS) {
    n->owner->ready(*n);
    return;
  }
  if (!reply)
    return;  // the connection is going: cleanup() marks the node down
  // Refused: say why (Redis's words name no password) and treat the node as down; it is dialled
  // again with backoff, in case the credentials are being rotated.
  const redis_access& a = n->owner->options.redis_auth;
  std::string words(reply->str ? reply->str : "", reply->str ? reply->len : 0);
  std::string why =
    !redis_auth_refused(reply) ? "unexpected answer to " +
                                   std::string(a.authenticates() ? "AUTH: " : "PING: ") + words
    : a.authenticates()
      ? "the credentials were refused (user " +
          (a.user.empty() ? std::string("default") : "'" + a.user + "'") + "): " + words
      : "the server wants credentials (storage.redis_password_file or KVTIER_REDIS_PASSWORD): " +
          words;
  ++n->owner->auth_failures;
  {
    std::lock_guard<std::mutex> guard(n->owner->error_mutex);
    n->refusal = why;
  }
  redisAsyncFree(c);
}

void redis_backend::loop::dial(node& n) {
  redisAsyncContext* c = nullptr;
  if (options.redis_auth.tls.enabled)
    c = redisAsyncConnectUnix(
      options.redis_auth.relay->entry_for(options.redis[n.index]).c_str());
  else
    c = redisAsyncConnect(n.host.c_str(), n.port);
  n.dialled_ns = now_ns();
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
