#pragma once

// A `kvtier serve` of the test's own on a free loopback port: started in the constructor (it
// waits for the "listening" line), stopped with SIGTERM by stop() or the destructor.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <vector>

#include "tests/storage/redis_server.hpp"

namespace kvtier::test {

class serve_process {
 public:
  explicit serve_process(std::vector<std::string> extra, int port = 0)
    : port_(port ? port : free_loopback_port()), extra_(std::move(extra)) {
    start();
  }
  ~serve_process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0)
      ::close(fd_);
  }
  serve_process(const serve_process&) = delete;
  serve_process& operator=(const serve_process&) = delete;

  std::string endpoint() const { return "tcp://127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  /// The server's process id (0 once stopped).
  pid_t pid() const { return pid_; }
  /// What it printed so far (stdout and stderr).
  const std::string& output() {
    drain(0);
    return out_;
  }

  /// SIGTERM (or `sig`), then its exit code (-1: killed by a signal, or still running after 30 s).
  int stop(int sig = SIGTERM) {
    if (pid_ <= 0)
      return code_;
    ::kill(pid_, sig);
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        drain(0);
        code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        return code_;
      }
      drain(10);
    }
    return -1;
  }

 private:
  void start() {
    int pipe_fds[2];
    if (::pipe(pipe_fds) != 0)
      throw std::runtime_error("pipe failed");
    std::vector<std::string> args = {KVTIER_BINARY, "serve", "--bind", endpoint()};
    args.insert(args.end(), extra_.begin(), extra_.end());
    pid_ = ::fork();
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      ::dup2(pipe_fds[1], 1);
      ::dup2(pipe_fds[1], 2);
      ::close(pipe_fds[0]);
      std::vector<char*> argv;
      for (auto& a : args)
        argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      _exit(127);
    }
    ::close(pipe_fds[1]);
    fd_ = pipe_fds[0];
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      drain(20);
      if (out_.find("listening on") != std::string::npos)
        return;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        drain(0);
        code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        throw std::runtime_error("kvtier serve exited " + std::to_string(code_) + ": " + out_);
      }
    }
    throw std::runtime_error("kvtier serve did not listen within 30 s: " + out_);
  }

  void drain(int timeout_ms) {
    if (fd_ < 0)
      return;
    pollfd p{fd_, POLLIN, 0};
    while (::poll(&p, 1, timeout_ms) > 0) {
      char buf[4096];
      ssize_t n = ::read(fd_, buf, sizeof(buf));
      if (n <= 0)
        return;
      out_.append(buf, static_cast<size_t>(n));
      timeout_ms = 0;
    }
  }

  int port_;
  std::vector<std::string> extra_;
  pid_t pid_ = 0;
  int fd_ = -1;
  int code_ = -1;
  std::string out_;
};

}  // namespace kvtier::test
