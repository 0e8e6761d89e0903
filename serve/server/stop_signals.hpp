#pragma once

// SIGTERM and SIGINT ask `kvtier serve` for a clean stop (docs/protocol.md, shutdown). The
// handler only sets a flag and wakes the socket loop through the eventfd it names.

#include <csignal>

namespace kvtier::serve {

/// Installs the handlers from the moment the server starts (a signal during start-up is kept,
/// not fatal); the previous handlers come back when it goes.
class stop_signals {
 public:
  stop_signals();
  ~stop_signals();
  stop_signals(const stop_signals&) = delete;
  stop_signals& operator=(const stop_signals&) = delete;

 private:
  struct sigaction old_term_ {}, old_int_ {};
};

/// True once a stop signal came.
bool stop_requested();

/// The eventfd a signal writes to wake the socket loop (-1: none). A signal that came before
/// the loop named its fd is written at once, so the loop cannot sleep through it.
void set_stop_wake_fd(int fd);

}  // namespace kvtier::serve
