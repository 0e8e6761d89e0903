#include "storage/redis_tls.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "storage/redis_backend.hpp"

namespace kvtier {

namespace {

// Per direction and connection: enough for a TLS record many times over, small beside a block.
constexpr size_t queue_bytes = 256u << 10;
// A server that has not finished its TCP connect and TLS handshake by then is not answering.
constexpr int64_t handshake_timeout_ns = 2'000'000'000;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           std::chrono::steady_clock::now().time_since_epoch())
    .count();
}

// OpenSSL's first queued error, as text (the queue is cleared).
std::string ssl_error_text() {
  unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0)
    return "unknown TLS error";
  char text[256];
  ERR_error_string_n(e, text, sizeof(text));
  return text;
}

bool is_ip_literal(const std::string& host) {
  unsigned char buf[sizeof(in6_addr)];
  return ::inet_pton(AF_INET, host.c_str(), buf) == 1 ||
         ::inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

// Bytes on their way one direction: read in at the tail, written out from the head.
struct byte_queue {
  std::unique_ptr<char[]> buf{new char[queue_bytes]};
  size_t head = 0, tail = 0;
  size_t size() const { return tail - head; }
  size_t space() {
    if (head > 0 && tail == queue_bytes) {
      std::memmove(buf.get(), buf.get() + head, tail - head);
      tail -= head;
      head = 0;
    }
    return queue_bytes - tail;
  }
  char* in() { return buf.get() + tail; }
  const char* out() const { return buf.get() + head; }
  void added(size_t n) { tail += n; }
  void taken(size_t n) {
    head += n;
    if (head == tail)
      head = tail = 0;
  }
};

struct listener {
  std::string address, host, path;
  int port = 0;
  int fd = -1;
};

// One relayed connection: hiredis's end of the Unix socket (`down`) and the server's (`up`).
struct relayed {
  size_t target = 0;  // listener index
  int down = -1, up = -1;
  SSL* ssl = nullptr;
  enum class phase { connecting, handshaking, open } at = phase::connecting;
  int64_t started_ns = 0;
  byte_queue to_up, to_down;
  size_t retry_write = 0;  // an SSL_write to repeat with this length (OpenSSL's rule)
  bool up_read = false, up_write = false, down_write = false;  // what it waits for
  bool done = false;
};

}  // namespace

struct redis_tls_relay::state {
  redis_tls_options options;
  SSL_CTX* ctx = nullptr;
  std::string dir;
  int wake_fd = -1;
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t>* handshake_failures = nullptr;
  mutable std::mutex mutex;  // listeners and errors
  std::vector<std::unique_ptr<listener>> listeners;
  std::map<std::string, std::string> errors;
  std::vector<std::unique_ptr<relayed>> conns;  // the relay thread's alone

  void note(const listener& l, const std::string& why) {
    std::lock_guard<std::mutex> guard(mutex);
    errors[l.address] = why;
  }
  const listener& target_of(const relayed& c) {
    std::lock_guard<std::mutex> guard(mutex);
    return *listeners[c.target];
  }

  void close(relayed& c, const std::string& why) {
    if (!why.empty())
      note(target_of(c), why);
    if (c.ssl)
      SSL_free(c.ssl);
    c.ssl = nullptr;
    if (c.up >= 0)
      ::close(c.up);
    if (c.down >= 0)
      ::close(c.down);
    c.up = c.down = -1;
    c.done = true;
  }

  void accept_from(size_t index, int listen_fd) {
    for (;;) {
      int down = ::accept4(listen_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (down < 0)
        return;
      auto c = std::make_unique<relayed>();
      c->target = index;
      c->down = down;
      c->started_ns = now_ns();
      const listener& l = target_of(*c);
      addrinfo hints{};
      hints.ai_family = AF_UNSPEC;
      hints.ai_socktype = SOCK_STREAM;
      addrinfo* found = nullptr;
      std::string port = std::to_string(l.port);
      if (::getaddrinfo(l.host.c_str(), port.c_str(), &hints, &found) != 0 || !found) {
        close(*c, "cannot resolve " + l.host);
        continue;
      }
      c->up = ::socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      int one = 1;
      if (c->up >= 0)
        ::setsockopt(c->up, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      bool started = c->up >= 0 && (::connect(c->up, found->ai_addr, found->ai_addrlen) == 0 ||
                                    errno == EINPROGRESS);
      int error = errno;
      ::freeaddrinfo(found);
      if (!started) {
        close(*c, "cannot connect to " + l.address + ": " + std::strerror(error));
        continue;
      }
      conns.push_back(std::move(c));
    }
  }

  // The TCP connect is through: start TLS, checking the certificate's name.
  void begin_tls(relayed& c) {
    const listener& l = target_of(c);
    int error = 0;
    socklen_t len = sizeof(error);
    if (::getsockopt(c.up, SOL_SOCKET, SO_ERROR, &error, &len) != 0 || error != 0) {
      close(c, "cannot connect to " + l.address + ": " + std::strerror(error ? error : errno));
      return;
    }
    c.ssl = SSL_new(ctx);
    std::string name = options.server_name.empty() ? l.host : options.server_name;
    bool named = c.ssl && SSL_set_fd(c.ssl, c.up) == 1;
    if (named && is_ip_literal(name)) {
      named = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c.ssl), name.c_str()) == 1;
    } else if (named) {
      named = SSL_set1_host(c.ssl, name.c_str()) == 1 &&
              SSL_set_tlsext_host_name(c.ssl, name.c_str()) == 1;
    }
    if (!named) {
      close(c, "cannot set up TLS for " + l.address + ": " + ssl_error_text());
      return;
    }
    c.at = relayed::phase::handshaking;
  }

  void handshake(relayed& c) {
    int r = SSL_connect(c.ssl);
    if (r == 1) {
      c.at = relayed::phase::open;
      std::lock_guard<std::mutex> guard(mutex);
      errors.erase(listeners[c.target]->address);
      return;
    }
    int e = SSL_get_error(c.ssl, r);
    if (e == SSL_ERROR_WANT_READ) {
      c.up_read = true;
      return;
    }
    if (e == SSL_ERROR_WANT_WRITE) {
      c.up_write = true;
      return;
    }
    long verify = SSL_get_verify_result(c.ssl);
    std::string why = verify != X509_V_OK
                        ? std::string("certificate verify failed: ") +
                            X509_verify_cert_error_string(verify)
                        : ssl_error_text();
    ++*handshake_failures;
    close(c, "TLS handshake with " + target_of(c).address + " failed: " + why);
  }

  // Moves what can move, both ways, until nothing does; records what it waits for.
  void pump(relayed& c) {
    c.up_read = c.up_write = c.down_write = false;
    for (bool moved = true; moved && !c.done;) {
      moved = false;
      if (size_t room = c.to_up.space()) {
        ssize_t n = ::read(c.down, c.to_up.in(), room);
        if (n > 0) {
          c.to_up.added(static_cast<size_t>(n));
          moved = true;
        } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
          close(c, "");  // hiredis closed its end
          return;
        }
      }
      if (c.at == relayed::phase::connecting)
        return;  // waits for the connect (POLLOUT on `up`)
      if (c.at == relayed::phase::handshaking) {
        handshake(c);
        if (c.at != relayed::phase::open)
          return;
        moved = true;
      }
      while (c.to_up.size() > 0) {
        size_t len = c.retry_write ? c.retry_write : c.to_up.size();
        int n = SSL_write(c.ssl, c.to_up.out(), static_cast<int>(len));
        if (n > 0) {
          c.retry_write = 0;
          c.to_up.taken(static_cast<size_t>(n));
          moved = true;
          continue;
        }
        int e = SSL_get_error(c.ssl, n);
        c.retry_write = len;
        if (e == SSL_ERROR_WANT_WRITE) {
          c.up_write = true;
        } else if (e == SSL_ERROR_WANT_READ) {
          c.up_read = true;
        } else {
          close(c, "TLS write to " + target_of(c).address + " failed: " + ssl_error_text());
          return;
        }
        break;
      }
      while (size_t room = c.to_down.space()) {
        int n = SSL_read(c.ssl, c.to_down.in(), static_cast<int>(room));
        if (n > 0) {
          c.to_down.added(static_cast<size_t>(n));
          moved = true;
          continue;
        }
        int e = SSL_get_error(c.ssl, n);
        if (e == SSL_ERROR_WANT_READ) {
          c.up_read = true;
        } else if (e == SSL_ERROR_WANT_WRITE) {
          c.up_write = true;
        } else {
          // The server closed (or the TLS stream broke): hand over what came, then close.
          if (c.to_down.size() > 0)
            ::send(c.down, c.to_down.out(), c.to_down.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
          close(c, e == SSL_ERROR_ZERO_RETURN ? "" : "connection to " + target_of(c).address +
                                                        " ended: " + ssl_error_text());
          return;
        }
        break;
      }
      if (c.to_down.size() > 0) {
        ssize_t n = ::send(c.down, c.to_down.out(), c.to_down.size(), MSG_NOSIGNAL);
        if (n > 0) {
          c.to_down.taken(static_cast<size_t>(n));
          moved = true;
        } else if (errno == EAGAIN || errno == EINTR) {
          c.down_write = true;
        } else {
          close(c, "");
          return;
        }
      }
    }
  }

  void run() {
    // A write to a server that went away must fail with EPIPE, not stop the process.
    sigset_t pipe;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
    std::vector<pollfd> fds;
    std::vector<std::pair<int, size_t>> what;  // (kind: 0 wake, 1 listener, 2 down, 3 up; index)
    while (!stopping.load()) {
      fds.clear();
      what.clear();
      fds.push_back({wake_fd, POLLIN, 0});
      what.push_back({0, 0});
      {
        std::lock_guard<std::mutex> guard(mutex);
        for (size_t i = 0; i < listeners.size(); ++i) {
          fds.push_back({listeners[i]->fd, POLLIN, 0});
          what.push_back({1, i});
        }
      }
      int64_t now = now_ns();
      for (size_t i = 0; i < conns.size(); ++i) {
        relayed& c = *conns[i];
        if (c.at != relayed::phase::open && now - c.started_ns > handshake_timeout_ns) {
          close(c, "no TLS connection to " + target_of(c).address + " within 2 s");
          continue;
        }
        short down = static_cast<short>((c.to_up.space() > 0 ? POLLIN : 0) |
                                        (c.down_write ? POLLOUT : 0));
        short up = c.at == relayed::phase::connecting
                     ? POLLOUT
                     : static_cast<short>((c.up_read || c.to_down.space() > 0 ? POLLIN : 0) |
                                          (c.up_write ? POLLOUT : 0));
        fds.push_back({c.down, down, 0});
        what.push_back({2, i});
        fds.push_back({c.up, up, 0});
        what.push_back({3, i});
      }
      if (::poll(fds.data(), fds.size(), 100) < 0 && errno != EINTR)
        break;
      for (size_t k = 0; k < fds.size(); ++k) {
        if (fds[k].revents == 0)
          continue;
        auto [kind, i] = what[k];
        if (kind == 0) {
          uint64_t drained;
          ssize_t r = ::read(wake_fd, &drained, sizeof(drained));
          (void)r;
        } else if (kind == 1) {
          accept_from(i, fds[k].fd);
        } else if (!conns[i]->done) {
          relayed& c = *conns[i];
          if (kind == 3 && c.at == relayed::phase::connecting)
            begin_tls(c);
          if (!c.done)
            pump(c);
        }
      }
      conns.erase(std::remove_if(conns.begin(), conns.end(),
                                 [](const std::unique_ptr<relayed>& c) { return c->done; }),
                  conns.end());
    }
    for (auto& c : conns)
      close(*c, "");
    conns.clear();
  }
};

redis_tls_relay::redis_tls_relay(const redis_tls_options& o) : state_(std::make_unique<state>()) {
  state& s = *state_;
  s.options = o;
  s.handshake_failures = &handshake_failures_;
  s.ctx = SSL_CTX_new(TLS_client_method());
  if (!s.ctx)
    throw std::invalid_argument("storage.redis_tls: cannot set up TLS: " + ssl_error_text());
  auto fail = [&](const std::string& key, const std::string& file) {
    std::string why = ssl_error_text();
    SSL_CTX_free(s.ctx);
    s.ctx = nullptr;
    return std::invalid_argument(key + ": cannot use '" + file + "': " + why);
  };
  SSL_CTX_set_min_proto_version(s.ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(s.ctx, SSL_VERIFY_PEER, nullptr);
  SSL_CTX_set_mode(s.ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (!o.ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(s.ctx, o.ca_file.c_str(), nullptr) != 1)
      throw fail("storage.redis_tls_ca_file", o.ca_file);
  } else if (SSL_CTX_set_default_verify_paths(s.ctx) != 1) {
    throw fail("storage.redis_tls_ca_file", "the system's certificates");
  }
  if (o.cert_file.empty() != o.key_file.empty()) {
    SSL_CTX_free(s.ctx);
    s.ctx = nullptr;
    throw std::invalid_argument("storage.redis_tls_cert_file, storage.redis_tls_key_file: a "
                                "client certificate needs both (one is set)");
  }
  if (!o.cert_file.empty()) {
    if (SSL_CTX_use_certificate_chain_file(s.ctx, o.cert_file.c_str()) != 1)
      throw fail("storage.redis_tls_cert_file", o.cert_file);
    if (SSL_CTX_use_PrivateKey_file(s.ctx, o.key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(s.ctx) != 1)
      throw fail("storage.redis_tls_key_file", o.key_file);
  }
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/kvtier-tls-XXXXXX";
  if (!::mkdtemp(pattern.data())) {  // mode 0700: only this user reaches the entries
    SSL_CTX_free(s.ctx);
    s.ctx = nullptr;
    throw std::invalid_argument(std::string("storage.redis_tls: cannot make a private "
                                            "directory for the TLS relay: ") +
                                std::strerror(errno));
  }
  s.dir = pattern;
  s.wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  thread_ = std::thread([&s] { s.run(); });
}

redis_tls_relay::~redis_tls_relay() {
  state& s = *state_;
  s.stopping = true;
  uint64_t one = 1;
  ssize_t r = ::write(s.wake_fd, &one, sizeof(one));
  (void)r;
  thread_.join();
  for (auto& l : s.listeners) {
    ::close(l->fd);
    ::unlink(l->path.c_str());
  }
  ::rmdir(s.dir.c_str());
  ::close(s.wake_fd);
  SSL_CTX_free(s.ctx);
}

std::string redis_tls_relay::entry_for(const std::string& address) {
  state& s = *state_;
  std::lock_guard<std::mutex> guard(s.mutex);
  for (const auto& l : s.listeners)
    if (l->address == address)
      return l->path;
  auto l = std::make_unique<listener>();
  l->address = address;
  std::tie(l->host, l->port) = parse_redis_address(address);
  if (l->host.size() > 2 && l->host.front() == '[' && l->host.back() == ']')
    l->host = l->host.substr(1, l->host.size() - 2);
  l->path = s.dir + "/" + std::to_string(s.listeners.size()) + ".sock";
  l->fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, l->path.c_str(), sizeof(a.sun_path) - 1);
  if (l->fd < 0 || ::bind(l->fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::listen(l->fd, 128) != 0) {
    if (l->fd >= 0)
      ::close(l->fd);
    return l->path;  // nothing listens there: the dial fails as a refused connection would
  }
  s.listeners.push_back(std::move(l));
  uint64_t one = 1;
  ssize_t r = ::write(s.wake_fd, &one, sizeof(one));
  (void)r;
  return s.listeners.back()->path;
}

std::string redis_tls_relay::last_error(const std::string& address) const {
  std::lock_guard<std::mutex> guard(state_->mutex);
  auto it = state_->errors.find(address);
  return it == state_->errors.end() ? std::string() : it->second;
}

}  // namespace kvtier
