#pragma once

// A redis-server of the test's own, on a free loopback port: started in the constructor (no
// persistence, nothing written outside a temporary directory), killed in the destructor. kill()
// and start() again on the same port stage a node crash and its return. A test that cannot start
// one fails: tools/setup installs redis-server.

#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace kvtier::test {

/// A loopback port nothing listens on (`wanted`: try that one; 0: any the kernel picks).
inline int free_loopback_port(int wanted = 0) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(wanted));
  socklen_t len = sizeof(a);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0)
      ::close(fd);
    throw std::runtime_error("no free loopback port");
  }
  int port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

class redis_server {
 public:
  /// `extra`: more server arguments (cluster mode, TLS); `dir`: its working directory (made if
  /// absent). `port`: 0 for any free one. `password`: the default user's (requirepass); the
  /// helper's own commands authenticate with it.
  explicit redis_server(std::string maxmemory = "256mb", std::vector<std::string> extra = {},
                        std::string dir = "/tmp", int port = 0, std::string password = {})
    : maxmemory_(std::move(maxmemory)), extra_(std::move(extra)), dir_(std::move(dir)),
      password_(std::move(password)) {
    if (!password_.empty())
      extra_.insert(extra_.end(), {"--requirepass", password_});
    ::mkdir(dir_.c_str(), 0700);
    port_ = port > 0 ? port : free_loopback_port();
    start();
  }
  ~redis_server() { kill(); }
  redis_server(const redis_server&) = delete;
  redis_server& operator=(const redis_server&) = delete;

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }
  bool running() const { return pid_ > 0; }

  void start() {
    std::string port = std::to_string(port_);
    std::vector<std::string> args = {"redis-server", "--port", port, "--bind", "127.0.0.1",
                                     "--save", "", "--appendonly", "no", "--dir", dir_,
                                     "--maxmemory", maxmemory_, "--maxmemory-policy", "noeviction",
                                     "--logfile", ""};
    args.insert(args.end(), extra_.begin(), extra_.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // a test that crashes takes its servers with it
      std::vector<char*> argv;
      for (auto& a : args)
        argv.push_back(a.data());
      argv.push_back(nullptr);
      if (!freopen("/dev/null", "w", stdout)) _exit(126);
      ::execvp("redis-server", argv.data());
      _exit(127);
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        throw std::runtime_error("redis-server did not start (is it installed? tools/setup): "
                                 "exit status " + std::to_string(WEXITSTATUS(status)));
      }
      if (ping())
        return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill();
    throw std::runtime_error("redis-server on port " + port + " did not answer within 5 s");
  }

  void kill() {
    if (pid_ <= 0)
      return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }

  /// SIGSTOP and SIGCONT: a server that hangs (replicates nothing, answers nothing) and resumes.
  void pause() { ::kill(pid_, SIGSTOP); }
  void resume() { ::kill(pid_, SIGCONT); }

  /// Runs one command on a blocking connection; returns the reply as text ("" on error).
  std::string command(const std::vector<std::string>& words) const {
    timeval tv{2, 0};
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port_, tv);
    if (!c || c->err) {
      if (c)
        redisFree(c);
      return "";
    }
    if (!password_.empty())
      freeReplyObject(redisCommand(c, "AUTH %s", password_.c_str()));
    std::vector<const char*> argv;
    std::vector<size_t> len;
    for (const auto& w : words) {
      argv.push_back(w.c_str());
      len.push_back(w.size());
    }
    auto* r = static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), len.data()));
    std::string out;
    if (r) {
      if (r->type == REDIS_REPLY_INTEGER)
        out = std::to_string(r->integer);
      else if (r->str)
        out.assign(r->str, r->len);
      freeReplyObject(r);
    }
    redisFree(c);
    return out;
  }

  bool ping() const { return command({"PING"}) == "PONG"; }
  uint64_t keys() const {
    std::string n = command({"DBSIZE"});
    return n.empty() ? 0 : std::stoull(n);
  }

 private:
  std::string maxmemory_;
  std::vector<std::string> extra_;
  std::string dir_;
  std::string password_;
  int port_ = 0;
  pid_t pid_ = 0;
};

}  // namespace kvtier::test
