#include "sim/full/time_checks.hpp"

#include "core/time_math.hpp"
#include "runtime/config/time_limits.hpp"

namespace kvtier {

namespace {

// The field a format records a request's time in.
const char* time_field(trace_format format, bool think) {
  switch (format) {
    case trace_format::mooncake: return "timestamp";
    case trace_format::azure: return "TIMESTAMP";
    case trace_format::agentic: return think ? "think_time" : "t";
    case trace_format::native: return think ? "think_time_s" : "arrival_s";
    case trace_format::detect: break;
  }
  return think ? "think time" : "arrival";
}

}  // namespace

void check_request_times(const trace_request& r, double time_scale, const std::string& path,
                         trace_format format) {
  auto check = [&](int64_t ns, const char* field, const char* what) {
    double scaled = static_cast<double>(ns) * time_scale;
    if (scaled > static_cast<double>(input_time_limit_ns))
      throw trace_error(path, r.line, field,
                        std::string(what) + " of " +
                          time_limit_figure(static_cast<double>(ns) / 1e9) +
                          " s times trace.time_scale " + time_limit_figure(time_scale) + " is " +
                          time_limit_days(scaled) + ", beyond the " +
                          time_limit_days(static_cast<double>(input_time_limit_ns)) +
                          " a trace may span");
  };
  if (r.follows_previous)
    check(r.think_ns, time_field(format, true), "a think time");
  else
    check(r.arrival_ns, time_field(format, false), "an arrival");
}

void check_virtual_time(const full_result& r) {
  bool reached = r.last_event_ns >= time_limit_ns;
  for (const request_record& x : r.scheduler.requests)
    reached = reached || x.finish_ns >= time_limit_ns || x.first_token_ns >= time_limit_ns;
  if (reached)
    throw config_error(
      "virtual time reached its limit of " + time_limit_days(static_cast<double>(time_limit_ns)) +
      ": the trace's times (x trace.time_scale, session think times add up turn after turn) and "
      "the step and transfer times of compute.*, links.* and storage.* are too long together");
}

}  // namespace kvtier
