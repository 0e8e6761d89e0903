#include "sim/report/load_check.hpp"

#include <algorithm>
#include <cmath>

#include "sim/report/summary_math.hpp"

namespace kvtier {

namespace {

constexpr double min_rise_s = 1.0;
constexpr double min_growth = 0.05;  // seconds of wait per second of arrivals

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[(v.size() - 1) / 2];
}

}  // namespace

nlohmann::json load_check(const std::vector<request_record>& requests) {
  std::vector<const request_record*> admitted;
  for (const auto& r : requests)
    if (r.admitted_ns >= 0)
      admitted.push_back(&r);
  std::stable_sort(admitted.begin(), admitted.end(),
                   [](auto* a, auto* b) { return a->arrival_ns < b->arrival_ns; });
  size_t q = admitted.size() / 4;
  if (q < 2)
    return {{"overloaded", false}, {"queue_growth", 0.0},
            {"queue_wait_s_by_quarter", nlohmann::json::array()}};
  std::vector<double> waits[4], arrivals[4];
  for (size_t i = 0; i < 4 * q; ++i) {
    const request_record& r = *admitted[i];
    waits[i / q].push_back(static_cast<double>(r.admitted_ns - r.arrival_ns) / 1e9);
    arrivals[i / q].push_back(static_cast<double>(r.arrival_ns) / 1e9);
  }
  double m[4];
  for (int i = 0; i < 4; ++i)
    m[i] = median(waits[i]);
  double span = median(arrivals[3]) - median(arrivals[0]);
  double growth = span > 0 ? (m[3] - m[0]) / span : 0;
  bool overloaded = m[3] - m[0] > min_rise_s && growth > min_growth;
  return {{"overloaded", overloaded},
          {"queue_growth", round6(growth)},
          {"queue_wait_s_by_quarter", {round6(m[0]), round6(m[1]), round6(m[2]), round6(m[3])}}};
}

}  // namespace kvtier
