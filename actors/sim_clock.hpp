#pragma once

// Virtual time for every actor. In a virtual replay CAF's test coordinator owns the clock: it
// jumps to the next timer once every mailbox is drained, so time is simulated and exact. In a
// wall-clock replay time is the steady clock since the start times `speed` (virtual seconds per
// wall second). Actors read time and wait only through this class, so the same behaviour runs
// under both clocks. Conversions saturate (core/time_math.hpp): a huge wait or a tiny speed
// gives the limit of virtual time, never a wrapped value.

#include <chrono>
#include <cstdint>

#include "caf/actor_clock.hpp"
#include "caf/timespan.hpp"

#include "core/time_math.hpp"

namespace kvtier {

class sim_clock {
 public:
  enum class kind : uint8_t { virtual_time, wall };

  sim_clock() = default;
  sim_clock(caf::actor_clock::time_point epoch, double speed, kind k = kind::virtual_time)
    : epoch_(epoch), speed_(speed), kind_(k) {}

  /// Time is the steady clock's: a timer already due may be a plain message to oneself. (In
  /// virtual time a timer fires only once every mailbox is drained, an order replays rely on.)
  bool on_wall() const { return kind_ == kind::wall; }

  /// Virtual nanoseconds since the start.
  int64_t now(const caf::actor_clock& clock) const { return at(clock.now()); }

  /// Virtual nanoseconds at wall instant `t` (a wall-clock run's: another thread's reading of the
  /// actor clock, turned into the actors' time).
  int64_t at(caf::actor_clock::time_point t) const {
    auto wall = std::chrono::duration_cast<std::chrono::nanoseconds>(t - epoch_);
    return speed_ == 1.0 ? wall.count() : time_from(static_cast<double>(wall.count()) * speed_);
  }

  /// The wait until virtual time `t` (zero if it has passed).
  caf::timespan until(const caf::actor_clock& clock, int64_t t) const {
    int64_t delta = t - now(clock);
    if (delta <= 0)
      return caf::timespan{0};
    return caf::timespan{speed_ == 1.0 ? delta : time_from(static_cast<double>(delta) / speed_)};
  }

 private:
  caf::actor_clock::time_point epoch_{};
  double speed_ = 1.0;
  kind kind_ = kind::virtual_time;
};

}  // namespace kvtier
