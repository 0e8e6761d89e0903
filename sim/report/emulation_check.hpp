#pragma once

// The emulation check's arithmetic (docs/outputs.md, "kvtier bench emulation"): how far the
// modelled backend's times land from the real backend's, per request and per link, as a
// distribution (p50, p90, max of the absolute error) and against the check's targets
// (total within 5%, p90 per request within 10%, each link within 5%). Plain numbers only, so the
// CPU tests cover what the GPU run reports.

#include <cstdint>
#include <string>
#include <vector>

#include "model/messages/reports.hpp"

namespace kvtier {

/// Signed relative error of a prediction: (predicted - measured) / measured (0 when nothing was
/// measured).
double relative_error(double predicted, double measured);

/// The absolute errors' distribution (nearest rank).
struct error_spread {
  size_t count = 0;
  double p50 = 0, p90 = 0, max = 0;
};
error_spread spread_of(const std::vector<double>& errors);

struct emulation_targets {
  double total = 0.05;        ///< the total swap-in time
  double request_p90 = 0.10;  ///< p90 of the per-request errors
  double link = 0.05;         ///< each link's total (H2D, D2H)
};

/// One link's (or the stall's) totals in both runs.
struct link_comparison {
  std::string name;
  double predicted_ns = 0, measured_ns = 0;
  bool targeted = true;  ///< held to emulation_targets::link (the stall is reported only)
};

/// What missed its target, one line each ("" when all met).
std::vector<std::string> missed_targets(double total_error, const error_spread& requests,
                                        const std::vector<link_comparison>& links,
                                        const emulation_targets& targets = {});

/// How long transfers of the kinds `d2h` picks ran while `t` did (their intervals' overlap
/// with t's, summed), from a run's transfer log: the contention a swap-in met.
int64_t overlap_ns(const transfer_log& t, const std::vector<transfer_log>& log, bool d2h);

}  // namespace kvtier
