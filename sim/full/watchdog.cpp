#include "sim/full/watchdog.hpp"

#include <stdexcept>

namespace kvtier {

template <class Handle>
void watchdog::watch(const Handle& h, std::string name) {
  names_[caf::actor_cast<caf::actor_addr>(h)] = std::move(name);
  self_->monitor(h);
}

watchdog::watchdog(caf::actor_system& sys, const deployment& d) : self_(sys, true) {
  watch(d.storage, "storage");
  watch(d.front_end, "front end");
  for (const instance& x : d.instances) {
    watch(x.scheduler, x.name + " scheduler");
    watch(x.controller, x.name + " cache controller");
    if (x.engine)
      watch(x.engine, x.name + " transfer engine");
    if (x.compute)
      watch(x.compute, x.name + " GPU compute");
  }
}

void watchdog::check() {
  if (self_->mailbox().size() == 0)
    return;
  std::string what;
  self_->receive([&](caf::down_msg& m) {
    what = "the " + names_[m.source] + " actor stopped: " + caf::to_string(m.reason);
  });
  throw std::runtime_error(what);
}

}  // namespace kvtier
