#include "sim/report/load_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sim/report/summary_math.hpp"

namespace kvtier {

namespace {

constexpr double min_rise_s = 1.0;
constexpr double min_growth = 0.05;     // seconds of wait per second of arrivals
// Of the run's time; the same share above which the replay warns of lag (sim/driver).
constexpr double min_lag_share = 0.01;
constexpr double min_wait_share = 0.05;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[(v.size() - 1) / 2];
}

std::string text(const char* fmt, double a, double b = 0, double c = 0) {
  char buf[512];
  std::snprintf(buf, sizeof(buf), fmt, a, b, c);
  return buf;
}

// The queue's trend: median waits by quarter of arrivals, and their growth per second.
struct queue_trend {
  double wait[4] = {0, 0, 0, 0};
  double growth = 0;
  bool known = false;
};

queue_trend trend_of(const std::vector<request_record>& requests) {
  std::vector<const request_record*> admitted;
  for (const auto& r : requests)
    if (r.admitted_ns >= 0)
      admitted.push_back(&r);
  std::stable_sort(admitted.begin(), admitted.end(),
                   [](auto* a, auto* b) { return a->arrival_ns < b->arrival_ns; });
  queue_trend t;
  size_t q = admitted.size() / 4;
  if (q < 2)
    return t;
  std::vector<double> waits[4], arrivals[4];
  for (size_t i = 0; i < 4 * q; ++i) {
    const request_record& r = *admitted[i];
    waits[i / q].push_back(static_cast<double>(r.admitted_ns - r.arrival_ns) / 1e9);
    arrivals[i / q].push_back(static_cast<double>(r.arrival_ns) / 1e9);
  }
  for (int i = 0; i < 4; ++i)
    t.wait[i] = median(waits[i]);
  double span = median(arrivals[3]) - median(arrivals[0]);
  t.growth = span > 0 ? (t.wait[3] - t.wait[0]) / span : 0;
  t.known = true;
  return t;
}

std::string bytes_text(double b) {
  const char* unit = b >= 1e9 ? "GB" : b >= 1e6 ? "MB" : b >= 1e3 ? "kB" : "bytes";
  double scaled = b >= 1e9 ? b / 1e9 : b >= 1e6 ? b / 1e6 : b >= 1e3 ? b / 1e3 : b;
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.3g %s", scaled, unit);
  return buf;
}

// What to change, by cause: the action alone (the cause is said beside it).
std::string advice_of(const std::string& cause, const load_inputs& in) {
  if (cause == "clock_lag")
    return "lower --speed, or replay on the virtual clock (--clock virtual), which cannot lag; "
           "if the queue still grows then, arrivals outpace the instance";
  if (cause == "l3_backpressure")
    return "give the storage backend more room in flight (storage.max_inflight_bytes; at most "
           + bytes_text(in.inflight_peak_bytes) + " were), more nodes or bandwidth, or write "
           "less to it (cache.storage_write=on_host_evict); a larger trace.time_scale would only "
           "hide the cause; if the queue still grows without the waits, arrivals outpace the "
           "instance";
  if (cause == "arrivals")
    return text("stretch the trace (trace.time_scale above %g; configs/sample.json replays the "
                "bundled sample at 8, one of eight instances' share) or add instances "
                "(cluster.instances)",
                in.time_scale);
  return "";
}

const char* cause_text(const std::string& cause) {
  if (cause == "clock_lag")
    return "the machine did not keep up with the wall clock (clock lag)";
  if (cause == "l3_backpressure")
    return "the storage backend did not keep up (L3 backpressure)";
  return "arrivals outpaced the instance";
}

}  // namespace

nlohmann::json load_check(const std::vector<request_record>& requests, const load_inputs& in) {
  queue_trend t = trend_of(requests);
  bool overloaded = t.known && t.wait[3] - t.wait[0] > min_rise_s && t.growth > min_growth;
  double lag_share = in.virtual_s > 0 ? in.lag_s / in.virtual_s : 0;
  double wait_share = in.virtual_s > 0 ? in.store_wait_s / in.virtual_s : 0;
  bool clock_lag = lag_share > min_lag_share;
  bool backpressure = wait_share >= min_wait_share;
  std::string cause = !overloaded ? (clock_lag ? "clock_lag" : backpressure ? "l3_backpressure"
                                                                            : "none")
                      : clock_lag  ? "clock_lag"
                      : backpressure ? "l3_backpressure"
                                     : "arrivals";
  nlohmann::json quarters = nlohmann::json::array();
  if (t.known)
    quarters = {round6(t.wait[0]), round6(t.wait[1]), round6(t.wait[2]), round6(t.wait[3])};
  return {{"overloaded", overloaded},
          {"queue_growth", round6(t.growth)},
          {"queue_wait_s_by_quarter", quarters},
          {"clock_lag", clock_lag},
          {"clock_lag_share", round6(lag_share)},
          {"l3_backpressure", backpressure},
          {"l3_wait_share", round6(wait_share)},
          {"cause", cause},
          {"advice", advice_of(cause, in)}};
}

std::string load_text(const nlohmann::json& load) {
  std::string out;
  const std::string cause = load.value("cause", "none");
  const std::string advice = load.value("advice", "");
  if (load.value("overloaded", false)) {
    const auto& w = load["queue_wait_s_by_quarter"];
    out += text("  OVERLOADED      the queue grew through the run (median wait %.1f s in the "
                "first quarter of arrivals, %.1f s in the last): these figures measure queueing, "
                "not caching. Cause: ",
                w[0].get<double>(), w[3].get<double>())
           + cause_text(cause) + (cause == "arrivals" ? "; " + advice : " (below)") + "\n";
  }
  if (load.value("clock_lag", false))
    out += text("  CLOCK LAG       steps ran late for %.1f%% of the run's time: ",
                load["clock_lag_share"].get<double>() * 100)
           + cause_text("clock_lag") + "; " + advice_of("clock_lag", {}) + "\n";
  if (load.value("l3_backpressure", false))
    out += text("  L3 BACKPRESSURE transfers to and from storage waited for room among the bytes "
                "in flight for %.0f%% of the run's time (summed over transfers): ",
                load["l3_wait_share"].get<double>() * 100)
           + cause_text("l3_backpressure")
           + (cause == "l3_backpressure" ? "; " + advice : std::string()) + "\n";
  return out;
}

}  // namespace kvtier
