#include "serve/server/stop_signals.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdint>

namespace kvtier::serve {

namespace {

std::atomic<bool> requested{false};
std::atomic<int> wake_fd{-1};

void wake(int fd) {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(fd, &one, sizeof(one));
}

extern "C" void on_signal(int) {
  requested = true;
  int fd = wake_fd.load();
  if (fd >= 0)
    wake(fd);
}

}  // namespace

stop_signals::stop_signals() {
  requested = false;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, &old_term_);
  sigaction(SIGINT, &sa, &old_int_);
}

stop_signals::~stop_signals() {
  wake_fd = -1;
  sigaction(SIGTERM, &old_term_, nullptr);
  sigaction(SIGINT, &old_int_, nullptr);
}

bool stop_requested() { return requested; }

void set_stop_wake_fd(int fd) {
  wake_fd = fd;
  if (fd >= 0 && requested)
    wake(fd);
}

}  // namespace kvtier::serve
