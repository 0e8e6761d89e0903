// The load check (sim/report/load_check.hpp; docs/outputs.md, "--mode full"): overload, clock lag and
// L3 backpressure each named, and an overloaded run blamed on arrivals (and told to stretch the
// trace) only when neither clock lag nor backpressure explains its queue.

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "sim/report/load_check.hpp"

using namespace kvtier;

namespace {

constexpr int64_t s = 1'000'000'000;

// `n` requests one a second; each waits `grow` s longer than the one before it.
std::vector<request_record> queue(size_t n, double grow) {
  std::vector<request_record> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i].req = i;
    out[i].arrival_ns = static_cast<int64_t>(i) * s;
    out[i].admitted_ns = out[i].arrival_ns + static_cast<int64_t>(grow * double(i) * s);
  }
  return out;
}

load_inputs run_of(double virtual_s, double lag_s = 0, double wait_s = 0) {
  load_inputs in;
  in.virtual_s = virtual_s;
  in.lag_s = lag_s;
  in.store_wait_s = wait_s;
  in.inflight_peak_bytes = 256e6;
  in.time_scale = 1;
  return in;
}

bool says(const std::string& text, const std::string& what) {
  return text.find(what) != std::string::npos;
}

}  // namespace

TEST_CASE("load check: a steady queue is nothing to report", "[load]") {
  auto load = load_check(queue(400, 0.0), run_of(400));
  CHECK(load["overloaded"] == false);
  CHECK(load["clock_lag"] == false);
  CHECK(load["l3_backpressure"] == false);
  CHECK(load["cause"] == "none");
  CHECK(load["advice"] == "");
  CHECK(load_text(load).empty());
}

TEST_CASE("load check: a growing queue alone is arrivals, told to stretch the trace", "[load]") {
  auto load = load_check(queue(400, 0.5), run_of(600));
  CHECK(load["overloaded"] == true);
  CHECK(load["cause"] == "arrivals");
  std::string advice = load["advice"];
  CHECK(says(advice, "trace.time_scale above 1"));
  std::string text = load_text(load);
  CHECK(says(text, "OVERLOADED"));
  CHECK(says(text, "arrivals outpaced the instance"));
  CHECK_FALSE(says(text, "CLOCK LAG"));
  CHECK_FALSE(says(text, "L3 BACKPRESSURE"));
}

TEST_CASE("load check: a queue grown under L3 backpressure is not told to stretch the trace",
          "[load]") {
  // Transfers waited for room to storage 40% of the run's time, summed.
  auto load = load_check(queue(400, 0.5), run_of(600, 0, 240));
  CHECK(load["overloaded"] == true);
  CHECK(load["l3_backpressure"] == true);
  CHECK(load["l3_wait_share"].get<double>() == Approx(0.4));
  CHECK(load["cause"] == "l3_backpressure");
  std::string advice = load["advice"];
  CHECK(says(advice, "storage.max_inflight_bytes"));
  CHECK(says(advice, "at most 256 MB were"));
  CHECK_FALSE(says(advice, "stretch"));
  std::string text = load_text(load);
  CHECK(says(text, "OVERLOADED"));
  CHECK(says(text, "L3 BACKPRESSURE"));
  CHECK(says(text, "Cause: the storage backend did not keep up"));
  CHECK_FALSE(says(text, "stretch the trace"));
  // Below 5% of the run's time, waits are no cause.
  CHECK(load_check(queue(400, 0.5), run_of(600, 0, 20))["cause"] == "arrivals");
}

TEST_CASE("load check: a queue grown under clock lag blames the clock", "[load]") {
  auto load = load_check(queue(400, 0.5), run_of(600, 30, 240));
  CHECK(load["clock_lag"] == true);
  CHECK(load["l3_backpressure"] == true);
  CHECK(load["cause"] == "clock_lag");  // first: the clock's lag slows every step
  std::string advice = load["advice"];
  CHECK(says(advice, "--speed"));
  CHECK_FALSE(says(advice, "time_scale"));
  std::string text = load_text(load);
  CHECK(says(text, "CLOCK LAG"));
  CHECK(says(text, "L3 BACKPRESSURE"));
  CHECK_FALSE(says(text, "stretch the trace"));
}

TEST_CASE("load check: clock lag and backpressure are named when the queue held", "[load]") {
  auto lag = load_check(queue(400, 0.0), run_of(400, 8));  // 2% of the run late
  CHECK(lag["overloaded"] == false);
  CHECK(lag["cause"] == "clock_lag");
  CHECK(says(load_text(lag), "CLOCK LAG"));
  CHECK(load_check(queue(400, 0.0), run_of(400, 2))["clock_lag"] == false);  // 0.5%: within
  auto wait = load_check(queue(400, 0.0), run_of(400, 0, 100));
  CHECK(wait["cause"] == "l3_backpressure");
  CHECK(says(load_text(wait), "L3 BACKPRESSURE"));
  CHECK_FALSE(says(load_text(wait), "OVERLOADED"));
}
