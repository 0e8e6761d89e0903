#pragma once

// The figures summary.json is made of (docs/outputs.md): values rounded to 6 decimals, latency
// distributions, and the tier names its per-tier objects use.

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvtier {

/// `x` rounded to 6 decimals, as every non-integer figure of summary.json is.
double round6(double x);

/// Nanoseconds (any integer type) as seconds, rounded to 6 decimals.
template <class Ns>
double seconds6(Ns ns) {
  return round6(static_cast<double>(ns) / 1e9);
}

/// Nearest-rank percentile of `sorted` (p in [0, 100]); 0 when empty.
double percentile(const std::vector<double>& sorted, double p);

/// count, mean, p50, p90 and p99 of `v` (any order).
nlohmann::json distribution(std::vector<double> v);

}  // namespace kvtier
