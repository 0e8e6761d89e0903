#pragma once

// The search of the SLO capacity study (docs/sweep.md, "The SLO capacity study"): the highest
// arrival rate at which a configuration still meets its SLO, found to a stated precision with
// few replays. From a start rate it doubles (while the SLO holds) or halves (while it does not)
// until a met rate and a failed rate bracket the answer, then bisects the bracket geometrically
// until the failed rate is within `precision` above the met one. It assumes that meeting the
// SLO is monotone in the rate (more load never lowers the p99s); each replay is one step.

#include <cstddef>

namespace kvtier {

/// Rates a search may try: any (step 0), or whole multiples of `step` (trace.session_copies
/// adds whole copies), at most `ceiling` (0: no bound but the search's range).
struct rate_steps {
  double step = 0;
  double ceiling = 0;
};

class rate_search {
 public:
  enum class outcome { searching, bracketed, never_met, always_met };

  /// Rates are multiples of the trace's recorded rate (1 / trace.time_scale); the search gives
  /// up below start / 2^`range_doublings` (never met) and above start * 2^`range_doublings`.
  /// With `steps.step`, a bracket one step wide is as precise as the search gets.
  rate_search(double start, double precision, int range_doublings = 12, rate_steps steps = {});

  bool done() const { return state() != outcome::searching; }
  outcome state() const;
  /// The rate to replay next (while not done).
  double next() const { return next_; }
  /// Records whether the replay at next() met the SLO.
  void record(bool met);

  double sustained() const { return met_; }      ///< highest rate met; 0: none
  double failing() const { return failed_; }     ///< lowest rate failed; 0: none
  size_t iterations() const { return iterations_; }

 private:
  double on_step(double rate) const;

  double precision_;
  double step_;
  double lowest_;
  double highest_;
  double next_;
  double met_ = 0;
  double failed_ = 0;
  size_t iterations_ = 0;
};

const char* to_string(rate_search::outcome o);

}  // namespace kvtier
