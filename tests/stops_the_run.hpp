#pragma once

// Whether running `f` stops the run as a failed check does (KVTIER_ASSERT aborts): `f` runs in a
// forked child whose SIGABRT is not caught by Catch's handler, with its output discarded.

#include <csignal>
#include <cstdio>

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

namespace kvtier::test {

template <class F>
bool stops_the_run(F&& f) {
  std::fflush(nullptr);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::signal(SIGABRT, SIG_DFL);
    std::freopen("/dev/null", "w", stdout);
    std::freopen("/dev/null", "w", stderr);
    f();
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT;
}

}  // namespace kvtier::test
