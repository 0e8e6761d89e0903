#include "serve/client/client.hpp"

#include <atomic>
#include <cstring>

#include "serve/wire/call.hpp"
#include "serve/wire/error_reply.hpp"
#include "serve/wire/fields.hpp"

namespace kvtier::serve {

const msgpack::object* reply::find_in(const msgpack::object& map, std::string_view key) {
  return wire::find(map, key);
}

uint64_t reply::u64_in(const msgpack::object& map, std::string_view key) {
  return wire::u64(map, key);
}

uint64_t reply::u64(std::string_view key) const { return u64_in(root(), key); }

int64_t reply::i64(std::string_view key) const { return wire::i64(root(), key); }

bool reply::flag(std::string_view key) const { return wire::flag(root(), key); }

std::string reply::str(std::string_view key) const { return wire::str(root(), key); }

uint64_t reply::id() const {
  const msgpack::object* o = find("id");
  return o && o->type == msgpack::type::POSITIVE_INTEGER ? o->via.u64 : 0;
}

void check_ok(const reply& r) {
  if (std::optional<refusal_answer> e = decode_error(r.root()))
    throw remote_error(e->kind, e->message);
}

client::client(const std::string& endpoint, std::string token, std::chrono::milliseconds timeout,
               const curve_client_keys& curve)
  : client(std::make_unique<zmq::context_t>(1), nullptr, endpoint, std::move(token), timeout,
           curve) {}

client::client(zmq::context_t& shared, const std::string& endpoint, std::string token,
               std::chrono::milliseconds timeout, const curve_client_keys& curve)
  : client(nullptr, &shared, endpoint, std::move(token), timeout, curve) {}

client::client(std::unique_ptr<zmq::context_t> own, zmq::context_t* shared,
               const std::string& endpoint, std::string token, std::chrono::milliseconds timeout,
               const curve_client_keys& curve)
  : own_context_(std::move(own)),
    socket_(shared ? *shared : *own_context_, zmq::socket_type::dealer),
    token_(std::move(token)),
    timeout_(timeout) {
  // Calls sent just before the client goes (a bye) still leave; a server that is gone does not
  // hold the client for longer than this.
  socket_.set(zmq::sockopt::linger, 200);
  curve_on_ = curve.on();
  if (curve_on_)
    make_curve_client(socket_, curve);
  static std::atomic<uint64_t> clients{0};
  std::string watch = "inproc://kvtier-client-monitor-" + std::to_string(++clients);
  if (zmq_socket_monitor(socket_.handle(), watch.c_str(),
                         ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                           ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                           ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) == 0) {
    monitor_ = zmq::socket_t(shared ? *shared : *own_context_, zmq::socket_type::pair);
    monitor_.set(zmq::sockopt::linger, 0);
    monitor_.connect(watch);
  }
  socket_.connect(endpoint);
}

// The monitor's events (two frames each: event number and value, then the peer's endpoint).
std::string client::no_reply() {
  std::string why = "no reply from the server within " + std::to_string(timeout_.count()) + " ms";
  if (!monitor_)
    return why;
  bool failed = false;
  for (zmq::message_t event, where; monitor_.recv(event, zmq::recv_flags::dontwait);) {
    uint16_t number = 0;
    if (event.size() >= sizeof(number))
      std::memcpy(&number, event.data(), sizeof(number));
    if (event.more())
      (void)monitor_.recv(where, zmq::recv_flags::dontwait);
    handshake_done_ = handshake_done_ || number == ZMQ_EVENT_HANDSHAKE_SUCCEEDED;
    failed = failed || number != ZMQ_EVENT_HANDSHAKE_SUCCEEDED;
  }
  if (handshake_done_)
    return why;
  if (failed)
    return why + ": the server refused this connection's handshake (" +
           (curve_on_ ? "the server's public key given is not its own, or it admits listed "
                       "client keys only: --curve-key-file"
                     : "it runs with CURVE: give its public key, --curve-server-key-file") +
           ")";
  return why + (curve_on_ ? ": no handshake with it completed (is it running at that endpoint? "
                           "a server without CURVE, or with another key, never answers)"
                         : ": no handshake with it completed (is it running at that endpoint? "
                           "a server with CURVE answers only a client given its public key: "
                           "--curve-server-key-file)");
}

void write_call(msgpack::sbuffer& buf, std::string_view op, uint64_t id, const std::string& token,
                uint64_t engine, uint32_t fields, const std::function<void(map_writer&)>& fill) {
  buf.clear();
  uint32_t n = fields + 2 + !token.empty() + (engine != 0);
  map_writer w(buf, n);
  w.put_str("op", op);
  w.put("id", id);
  if (!token.empty())
    w.put_str("token", token);
  if (engine != 0)
    w.put("engine", engine);
  if (fill)
    fill(w);
}

void client::stamp(serve::call& c) {
  c.id = next_id_++;
  c.token = token_.empty() ? std::nullopt : std::optional<std::string>(token_);
  c.engine = engine_ == 0 ? std::nullopt : std::optional<uint64_t>(engine_);
}

uint64_t client::send(serve::call c) {
  stamp(c);
  encode_call(buf_, c);
  last_sent_ = buf_.size();
  socket_.send(zmq::const_buffer(buf_.data(), buf_.size()), zmq::send_flags::none);
  return c.id;
}

uint64_t client::send(std::string_view op, uint32_t fields,
                      const std::function<void(map_writer&)>& fill) {
  uint64_t id = next_id_++;
  write_call(buf_, op, id, token_, engine_, fields, fill);
  last_sent_ = buf_.size();
  socket_.send(zmq::const_buffer(buf_.data(), buf_.size()), zmq::send_flags::none);
  return id;
}

void client::send_raw(std::string_view bytes) {
  socket_.send(zmq::const_buffer(bytes.data(), bytes.size()), zmq::send_flags::none);
}

bool client::pull(std::chrono::milliseconds timeout) {
  zmq::message_t m;
  // A reply already queued is taken without a poll (one system call fewer per call).
  if (!socket_.recv(m, zmq::recv_flags::dontwait)) {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, timeout) == 0)
      return false;
    if (!socket_.recv(m, zmq::recv_flags::dontwait))
      return false;
  }
  reply r(msgpack::unpack(m.data<char>(), m.size()));
  r.bytes = m.size();
  uint64_t id = r.id();
  stash_.insert_or_assign(id, std::move(r));
  return true;
}

std::optional<reply> client::try_receive(uint64_t id) {
  while (pull(std::chrono::milliseconds(0))) {
  }
  auto it = stash_.find(id);
  if (it == stash_.end())
    return std::nullopt;
  reply r = std::move(it->second);
  stash_.erase(it);
  return r;
}

reply client::receive(uint64_t id) {
  auto deadline = std::chrono::steady_clock::now() + timeout_;
  for (;;) {
    auto it = stash_.find(id);
    if (it != stash_.end()) {
      reply r = std::move(it->second);
      stash_.erase(it);
      return r;
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      throw std::runtime_error(no_reply());
    pull(left);
  }
}

std::optional<reply> client::next(std::chrono::milliseconds timeout) {
  if (stash_.empty() && !pull(timeout))
    return std::nullopt;
  auto it = stash_.begin();
  reply r = std::move(it->second);
  stash_.erase(it);
  return r;
}

reply client::call(serve::call c) {
  reply r = receive(send(std::move(c)));
  check_ok(r);
  return r;
}

reply client::call(std::string_view op, uint32_t fields,
                   const std::function<void(map_writer&)>& fill) {
  reply r = receive(send(op, fields, fill));
  check_ok(r);
  return r;
}

reply client::hello(const std::string& name, const model_shape& model, uint32_t block_size,
                    const attach_request* tensors) {
  return hello_of(name, model, block_size, tensors, tensors ? attach_version : 1);
}

reply client::hello_version(const std::string& name, const model_shape& model,
                            uint32_t block_size, uint32_t version,
                            const attach_request* tensors) {
  reply r = hello_of(name, model, block_size, tensors, version);
  if (greeting_.version != version)
    throw remote_error("version", "the server chose version " + std::to_string(greeting_.version)
                                    + ", not " + std::to_string(version));
  return r;
}

reply client::hello_of(const std::string& name, const model_shape& model, uint32_t block_size,
                       const attach_request* tensors, uint32_t version) {
  engine_ = 0;
  serve::call c;
  c.op = verb::hello;
  c.versions = {version};
  c.name = name;
  c.model = model;
  c.block_size = block_size;
  c.config = shared_config_;
  if (tensors)
    c.tensors = *tensors;
  reply r = call(std::move(c));
  greeting_ = decode_hello_reply(r.root());
  engine_ = greeting_.engine;
  return r;
}

}  // namespace kvtier::serve
