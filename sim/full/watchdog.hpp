#pragma once

// Watches every actor of a deployment: an actor that stops on its own (an exception, a peer
// gone) would leave the requests it held unanswered, so a replay ends with what stopped it
// instead of waiting forever.

#include <map>
#include <string>

#include "caf/scoped_actor.hpp"

#include "runtime/deployment.hpp"

namespace kvtier {

class watchdog {
 public:
  watchdog(caf::actor_system& sys, const deployment& d);

  /// Throws std::runtime_error naming the actor if one has stopped.
  void check();

 private:
  template <class Handle>
  void watch(const Handle& h, std::string name);

  caf::scoped_actor self_;
  std::map<caf::actor_addr, std::string> names_;
};

}  // namespace kvtier
