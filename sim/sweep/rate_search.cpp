#include "sim/sweep/rate_search.hpp"

#include <algorithm>
#include <cmath>

namespace kvtier {

rate_search::rate_search(double start, double precision, int range_doublings, rate_steps steps)
    : precision_(precision),
      step_(steps.step),
      lowest_(std::max(steps.step, start * std::ldexp(1.0, -range_doublings))),
      highest_(start * std::ldexp(1.0, range_doublings)),
      next_(start) {
  if (steps.ceiling > 0)
    highest_ = std::min(highest_, steps.ceiling);
  next_ = on_step(std::min(start, highest_));
}

// The nearest rate the steps allow, within [lowest, highest].
double rate_search::on_step(double rate) const {
  if (step_ > 0)
    rate = std::round(rate / step_) * step_;
  return std::min(std::max(rate, lowest_), highest_);
}

rate_search::outcome rate_search::state() const {
  if (met_ > 0 && failed_ > 0 &&
      (failed_ <= met_ * (1 + precision_) || (step_ > 0 && failed_ - met_ <= step_)))
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
    next_ = on_step(met_ * 2);
  else if (met_ == 0)
    next_ = on_step(failed_ / 2);
  else  // strictly inside the bracket: state() ends the search before it is one step wide
    next_ = std::min(std::max(on_step(std::sqrt(met_ * failed_)), met_ + step_), failed_ - step_);
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
