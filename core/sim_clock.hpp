#pragma once

// Virtual time for every actor. In a virtual replay CAF's test coordinator owns the clock: it
// jumps to the next timer once every mailbox is drained, so time is simulated and exact. In a
// wall-clock replay time is the steady clock since the start times `speed` (virtual seconds per
// wall second). Actors read time and wait only through this class, so the same behaviour runs
// under both clocks. Conversions saturate (core/time_math.hpp): a huge wait or a tiny speed
// gives the limit of virtual time, never a wrapped value.

#include <chrono>
#include <cstdint>

#include "core/run_modes.hpp"
#include "core/time_math.hpp"

namespace kvtier {

class sim_clock {
 public:
  sim_clock() = default;
  sim_clock(std::chrono::steady_clock::time_point epoch, double speed,
            clock_mode k = clock_mode::virtual_time)
    : epoch_(epoch), speed_(speed), kind_(k) {}

  /// Time is the steady clock's: a timer already due may be a plain message to oneself. (In
  /// virtual time a timer fires only once every mailbox is drained, an order replays rely on.)
  bool on_wall() const { return kind_ == clock_mode::wall; }

  /// Virtual nanoseconds since the start. Templated on the clock (CAF's actor_clock, whose time
  /// points are steady_clock's) so that the CAF-free model can hold a sim_clock.
  template <class ActorClock>
  int64_t now(const ActorClock& clock) const { return at(clock.now()); }

  /// Virtual nanoseconds at wall instant `t` (a wall-clock run's: another thread's reading of the
  /// actor clock, turned into the actors' time).
  int64_t at(std::chrono::steady_clock::time_point t) const {
    auto wall = std::chrono::duration_cast<std::chrono::nanoseconds>(t - epoch_);
    return speed_ == 1.0 ? wall.count() : time_from(static_cast<double>(wall.count()) * speed_);
  }

  /// The wait until virtual time `t` (zero if it has passed).
  template <class ActorClock>
  std::chrono::nanoseconds until(const ActorClock& clock, int64_t t) const {
    int64_t delta = t - now(clock);
    if (delta <= 0)
      return std::chrono::nanoseconds{0};
    return std::chrono::nanoseconds{speed_ == 1.0 ? delta
                                                  : time_from(static_cast<double>(delta) / speed_)};
  }

 private:
  std::chrono::steady_clock::time_point epoch_{};
  double speed_ = 1.0;
  clock_mode kind_ = clock_mode::virtual_time;
};

}  // namespace kvtier
