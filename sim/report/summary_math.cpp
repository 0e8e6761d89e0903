#include "sim/report/summary_math.hpp"

#include <algorithm>
#include <cmath>

namespace kvtier {

double round6(double x) {
  return std::round(x * 1e6) / 1e6;
}

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty())
    return 0;
  auto rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size(), std::max<size_t>(rank, 1)) - 1];
}

nlohmann::json distribution(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v)
    sum += x;
  return {{"count", v.size()},
          {"mean", round6(v.empty() ? 0 : sum / static_cast<double>(v.size()))},
          {"p50", round6(percentile(v, 50))},
          {"p90", round6(percentile(v, 90))},
          {"p99", round6(percentile(v, 99))}};
}

}  // namespace kvtier
