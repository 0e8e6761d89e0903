#pragma once

// A link model driven by an actor's timers: the actor starts flows, and timers wake it when the
// next operation finishes. A timer that finds nothing due (it was set before a later plan) does
// nothing; at most one timer is set per distinct wake-up time.

#include <cstdint>
#include <vector>

#include "core/sim_clock.hpp"
#include "model/links/link_model.hpp"

namespace kvtier {

class timed_links {
 public:
  link_model& links() { return links_; }
  const link_model& links() const { return links_; }

  /// Advances the model to `now`; returns the operations finished on the way, in a list that
  /// recycle() takes back. An actor advances its links on every message: a list allocated each
  /// time is a malloc and a free per message (the list a handler still holds when it advances
  /// again, from a nested call, is not reused: that call gets a fresh one).
  std::vector<link_model::op_done> advance(int64_t now) {
    std::vector<link_model::op_done> done;
    done.swap(spare_);
    done.clear();
    links_.advance(now, done);
    if (next_wake_ <= now)
      next_wake_ = link_model::never;
    return done;
  }
  void recycle(std::vector<link_model::op_done>&& done) {
    if (done.capacity() > spare_.capacity())
      spare_ = std::move(done);
  }

  /// The time a new timer must be set for, or never if the pending one comes soon enough.
  int64_t wake_needed() {
    int64_t t = links_.next_event();
    if (t >= next_wake_)
      return link_model::never;
    next_wake_ = t;
    return t;
  }

 private:
  link_model links_;
  int64_t next_wake_ = link_model::never;
  std::vector<link_model::op_done> spare_;
};

/// Sets the timer `links.wake_needed()` asks for on `self` (any actor accepting wake_atom).
/// On the wall clock a wake-up already due is a message to itself: CAF's clock thread would
/// deliver it at once too, at the cost of two thread wake-ups (at high `speed` most are due).
template <class Self>
void arm(Self* self, const sim_clock& clock, timed_links& links) {
  int64_t t = links.wake_needed();
  if (t == link_model::never)
    return;
  caf::timespan wait = clock.until(self->clock(), t);
  if (wait == caf::timespan{0} && clock.on_wall())
    self->send(self, wake_atom_v, uint64_t{0});
  else
    self->delayed_send(self, wait, wake_atom_v, uint64_t{0});
}

}  // namespace kvtier
