#include "sim/report/emulation_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace kvtier {

double relative_error(double predicted, double measured) {
  return measured > 0 ? (predicted - measured) / measured : 0;
}

error_spread spread_of(const std::vector<double>& errors) {
  error_spread s;
  s.count = errors.size();
  if (errors.empty())
    return s;
  std::vector<double> a;
  for (double e : errors)
    a.push_back(std::abs(e));
  std::sort(a.begin(), a.end());
  auto rank = [&](double q) {
    auto k = static_cast<size_t>(std::ceil(q * static_cast<double>(a.size())));
    return a[std::max<size_t>(k, 1) - 1];
  };
  s.p50 = rank(0.5);
  s.p90 = rank(0.9);
  s.max = a.back();
  return s;
}

namespace {

std::string miss(const char* what, double error, double target) {
  char line[160];
  std::snprintf(line, sizeof line, "%s: %+.1f%%, target within %.0f%%", what, error * 100,
                target * 100);
  return line;
}

}  // namespace

std::vector<std::string> missed_targets(double total_error, const error_spread& requests,
                                        const std::vector<link_comparison>& links,
                                        const emulation_targets& targets) {
  std::vector<std::string> out;
  if (std::abs(total_error) > targets.total)
    out.push_back(miss("total swap-in time", total_error, targets.total));
  if (requests.p90 > targets.request_p90)
    out.push_back(miss("p90 of the per-request errors", requests.p90, targets.request_p90));
  for (const link_comparison& l : links) {
    double e = relative_error(l.predicted_ns, l.measured_ns);
    if (l.targeted && std::abs(e) > targets.link)
      out.push_back(miss((l.name + " link").c_str(), e, targets.link));
  }
  return out;
}

int64_t overlap_ns(const transfer_log& t, const std::vector<transfer_log>& log, bool d2h) {
  int64_t begin = t.start_ns, end = t.start_ns + t.duration_ns, sum = 0;
  for (const transfer_log& o : log) {
    if (o.id == t.id || is_d2h(o.kind) != d2h || (!d2h && o.kind != transfer_kind::swap_in))
      continue;
    int64_t b = std::max(begin, o.start_ns), e = std::min(end, o.start_ns + o.duration_ns);
    sum += std::max<int64_t>(0, e - b);
  }
  return sum;
}

}  // namespace kvtier
