#include "storage/redis_backend.hpp"

#include <chrono>
#include <mutex>
#include <stdexcept>

#include "core/check.hpp"
#include "storage/redis_dial.hpp"
#include "storage/redis_loop.hpp"
#include "storage/redis_tls.hpp"

namespace kvtier {

std::pair<std::string, int> parse_redis_address(const std::string& address) {
  auto colon = address.rfind(':');
  auto bad = [&] {
    return std::invalid_argument("storage.redis: '" + address + "': expected host:port");
  };
  if (colon == std::string::npos || colon == 0 || colon + 1 == address.size())
    throw bad();
  int port = 0;
  for (size_t i = colon + 1; i < address.size(); ++i) {
    if (address[i] < '0' || address[i] > '9')
      throw bad();
    port = port * 10 + (address[i] - '0');
    if (port > 65535)
      throw bad();
  }
  if (port == 0)
    throw bad();
  return {address.substr(0, colon), port};
}

redis_backend::redis_backend(const backend_options& o)
  : storage_backend(static_cast<uint32_t>(o.redis.size())), options_(o) {
  if (o.redis.empty())
    throw std::invalid_argument("storage.redis: the redis backend needs one host:port per node");
  prepare_redis_access(options_.redis_auth);
  loop_ = std::make_unique<loop>(options_);
  loop_->thread = std::thread([l = loop_.get()] { l->run(); });
  // Start with every node connected (a pool that begins with a node down is a set-up error).
  auto deadline = loop::now_ns() + 2'000 * loop::ms;
  while (loop::now_ns() < deadline) {
    bool all = true;
    for (uint32_t n = 0; n < nodes(); ++n)
      all = all && node_up(n);
    if (all)
      return;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::string down;
  bool refused = false;  // credentials or TLS: a setting to fix (exit 2), not a server down
  for (uint32_t n = 0; n < nodes(); ++n) {
    if (node_up(n))
      continue;
    std::string why;
    {
      std::lock_guard<std::mutex> guard(loop_->error_mutex);
      why = loop_->nodes[n]->refusal;
    }
    refused = refused || !why.empty();
    if (why.empty() && options_.redis_auth.tls.enabled) {
      why = options_.redis_auth.relay->last_error(o.redis[n]);
      refused = refused || why.find("TLS handshake") != std::string::npos;
    }
    down += (down.empty() ? "" : ", ") + o.redis[n] + (why.empty() ? "" : " (" + why + ")");
  }
  {
    std::lock_guard<std::mutex> guard(loop_->mutex);
    loop_->stopping = true;
  }
  loop_->wake();
  loop_->thread.join();
  if (refused)
    throw std::invalid_argument("storage.redis: cannot use " + down);
  throw std::runtime_error("storage.redis: cannot reach " + down);
}

redis_backend::~redis_backend() {
  listers_.join_all();
  {
    std::lock_guard<std::mutex> guard(loop_->mutex);
    loop_->stopping = true;
  }
  loop_->wake();
  loop_->thread.join();
}

bool redis_backend::node_up(uint32_t n) const {
  return loop_->nodes.at(n)->up.load();
}

void redis_backend::exists(std::vector<block_ref> blocks, exists_done done) {
  auto b = std::make_shared<loop::batch>();
  b->what = loop::op_kind::exists;
  b->blocks = std::move(blocks);
  b->on_exists = std::move(done);
  loop_->submit(std::move(b));
}

void redis_backend::get(std::vector<block_ref> blocks, std::vector<block_span> into,
                        get_done done) {
  KVTIER_ASSERT(into.size() == blocks.size());
  auto b = std::make_shared<loop::batch>();
  b->what = loop::op_kind::get;
  b->blocks = std::move(blocks);
  b->into = std::move(into);
  b->on_get = std::move(done);
  loop_->submit(std::move(b));
}

void redis_backend::put(std::vector<block_ref> blocks, std::vector<block_bytes_t> payloads,
                        put_done done) {
  auto b = std::make_shared<loop::batch>();
  b->what = loop::op_kind::put;
  b->blocks = std::move(blocks);
  b->payloads = std::move(payloads);
  b->on_put = std::move(done);
  loop_->submit(std::move(b));
}

void redis_backend::remove(std::vector<block_ref> blocks, remove_done done) {
  auto b = std::make_shared<loop::batch>();
  b->what = loop::op_kind::remove;
  b->blocks = std::move(blocks);
  b->on_remove = std::move(done);
  loop_->submit(std::move(b));
}

backend_counters redis_backend::counters() const {
  const loop& l = *loop_;
  backend_counters c;
  c.puts_ok = l.puts_ok;
  c.puts_failed = l.puts_failed;
  c.gets_hit = l.gets_hit;
  c.gets_missed = l.gets_missed;
  c.rollbacks = l.rollbacks;
  c.bytes_written = l.bytes_written;
  c.bytes_read = l.bytes_read;
  c.removed = l.removed;
  c.node_downs = l.node_downs;
  c.reconnects = l.reconnects;
  c.busy_ns = l.busy_ns;
  c.batches = l.batches;
  c.corrupt = l.corrupt;
  c.auth_failures = l.auth_failures;
  if (options_.redis_auth.relay)
    c.tls_failures = options_.redis_auth.relay->handshake_failures();
  std::lock_guard<std::mutex> guard(l.error_mutex);
  c.put_error = l.put_error;
  return c;
}

}  // namespace kvtier
