#pragma once

// An actor system on CAF's deterministic test coordinator, for protocol tests with exact
// virtual times.

#include <catch2/catch.hpp>

#include "caf/all.hpp"
#include "caf/scheduler/test_coordinator.hpp"

#include "actors/messages.hpp"
#include "core/sim_clock.hpp"

namespace kvtier::test {

struct det_config : caf::actor_system_config {
  det_config() {
    set("scheduler.policy", caf::atom("testing"));
    set("logger.file-verbosity", caf::atom("quiet"));
    add_kvtier_types(*this);
  }
};

struct det_fixture {
  det_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys, true};
  caf::scheduler::test_coordinator& sched =
    dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
  sim_clock clock{sys.clock().now(), 1.0};

  ~det_fixture() { run(); }

  /// Delivers every message, jumping the clock to each timer, until nothing is left.
  void run() {
    for (;;) {
      sched.run();
      if (!sched.trigger_timeout())
        return;
    }
  }

  int64_t now() { return clock.now(sys.clock()); }

  /// Sends a request from the test, runs the system to the end, and returns the reply and the
  /// virtual time it arrived at (the system ran to completion, so pass only work that ends).
  template <class Reply, class Handle, class... Ts>
  std::pair<Reply, int64_t> ask(const Handle& who, Ts&&... xs) {
    Reply out{};
    int64_t at = -1;
    bool got = false;
    auto handle = self->request(who, caf::infinite, std::forward<Ts>(xs)...);
    for (;;) {
      sched.run();
      if (self->mailbox().size() > 0)
        break;
      if (!sched.trigger_timeout())
        break;
    }
    at = now();
    handle.receive([&](Reply& r) { out = std::move(r); got = true; },
                   [&](const caf::error& e) { FAIL(caf::to_string(e)); });
    REQUIRE(got);
    return {out, at};
  }
};

}  // namespace kvtier::test
