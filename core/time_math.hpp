#pragma once

// Virtual time without overflow. Times are int64 nanoseconds; every sum of times in the replay
// goes through these helpers, which saturate at `time_limit_ns` (about 146 years) instead of
// wrapping, so a sum of saturated times stays at the limit, and a run whose clock reaches it is
// refused as a whole (sim/driver checks it) rather than reporting wrapped, silently wrong figures. Inputs are bounded well below it (a trace's scaled
// times at `input_time_limit_ns`, one step or transfer at `op_time_limit_ns`), so that only an
// absurdly long replay can get there.

#include <cmath>
#include <cstdint>

namespace kvtier {

/// Virtual time saturates here: 2^62 ns, about 146 years.
constexpr int64_t time_limit_ns = int64_t{1} << 62;
/// The latest scaled arrival or longest scaled think time a trace may give: 2^60 ns, 36.5 years.
constexpr int64_t input_time_limit_ns = int64_t{1} << 60;
/// The longest one step or one transfer may take: 2^50 ns, about 13 days.
constexpr int64_t op_time_limit_ns = int64_t{1} << 50;

/// a + b, capped at time_limit_ns (and never wrapping, whatever the operands).
constexpr int64_t time_add(int64_t a, int64_t b) {
  int64_t s = 0;
  if (__builtin_add_overflow(a, b, &s))
    return b > 0 ? time_limit_ns : -time_limit_ns;
  return s > time_limit_ns ? time_limit_ns : s;
}

/// Nanoseconds given as a double (a product or quotient of times and rates), rounded to the
/// nearest integer and kept in [0, time_limit_ns]; NaN counts as the limit.
inline int64_t time_from(double ns) {
  if (!(ns < static_cast<double>(time_limit_ns)))  // also NaN
    return time_limit_ns;
  if (ns <= 0)
    return 0;
  return std::llround(ns);
}

/// A configured number of microseconds (bounded by its option's range) in nanoseconds, rounded.
inline int64_t us_to_ns(double us) {
  return static_cast<int64_t>(us * 1000.0 + 0.5);
}

/// A recorded time stretched by `factor` (trace.time_scale), without overflow.
inline int64_t time_scaled(int64_t ns, double factor) {
  return factor == 1 && ns <= time_limit_ns ? ns : time_from(static_cast<double>(ns) * factor);
}

}  // namespace kvtier
