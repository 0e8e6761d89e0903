#include "sim/sweep/rate_search.hpp"

#include <cmath>

namespace kvtier {

rate_search::rate_search(double start, double precision, int range_doublings)
    : precision_(precision),
      lowest_(start * std::ldexp(1.0, -range_doublings)),
      highest_(start * std::ldexp(1.0, range_doublings)),
      next_(start) {}

rate_search::outcome rate_search::state() const {
  if (met_ > 0 && failed_ > 0 && failed_ <= met_ * (1 + precision_))
    return outcome::bracketed;
  if (met_ == 0 && failed_ > 0 && failed_ <= lowest_)
    return outcome::never_met;
  if (failed_ == 0 && met_ >= highest_)
    return outcome::always_met;
  return outcome::searching;
}

void rate_search::record(bool met) {
  ++iterations_;
  if (met)
    met_ = std::max(met_, next_);
  else
    failed_ = failed_ == 0 ? next_ : std::min(failed_, next_);
  if (failed_ == 0)
    next_ = met_ * 2;
  else if (met_ == 0)
    next_ = failed_ / 2;
  else
    next_ = std::sqrt(met_ * failed_);
}

const char* to_string(rate_search::outcome o) {
  switch (o) {
    case rate_search::outcome::searching: return "searching";
    case rate_search::outcome::bracketed: return "bracketed";
    case rate_search::outcome::never_met: return "never_met";
    case rate_search::outcome::always_met: return "always_met";
  }
  return "?";
}

}  // namespace kvtier
