// Azure LLM inference traces (2023 Splitwise, 2024 week-long): CSV
//   TIMESTAMP,ContextTokens,GeneratedTokens
//   2023-11-16 18:17:03.9799600,4808,10
// Timestamps are wall-clock strings with 100 ns resolution; arrivals are taken relative to the
// first row, in exact integer nanoseconds (a double of nanoseconds since 1970 would round at the
// microsecond). There is no prefix information.

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>

#include "sim/trace/line_source.hpp"
#include "sim/trace/readers.hpp"

namespace kvtier {

namespace {

constexpr std::string_view azure_header = "TIMESTAMP,ContextTokens,GeneratedTokens";

bool leap_year(int64_t y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

// Days from 1970-01-01 to the given date of the proleptic Gregorian calendar.
int64_t days_since_epoch(int64_t year, int64_t month, int64_t day) {
  static constexpr int64_t days_before_month[12] = {0,   31,  59,  90,  120, 151,
                                                    181, 212, 243, 273, 304, 334};
  auto leap_days_before = [](int64_t y) { return (y - 1) / 4 - (y - 1) / 100 + (y - 1) / 400; };
  int64_t days = 365 * (year - 1970) + leap_days_before(year) - leap_days_before(1970);
  days += days_before_month[month - 1] + (month > 2 && leap_year(year) ? 1 : 0);
  return days + day - 1;
}

// Reads exactly `width` digits at `pos` (advancing it) into `value`.
bool digits(std::string_view text, size_t& pos, size_t width, int64_t& value) {
  if (pos + width > text.size())
    return false;
  value = 0;
  for (size_t i = 0; i < width; ++i) {
    char c = text[pos + i];
    if (c < '0' || c > '9')
      return false;
    value = value * 10 + (c - '0');
  }
  pos += width;
  return true;
}

bool expect(std::string_view text, size_t& pos, char c) {
  if (pos >= text.size() || text[pos] != c)
    return false;
  ++pos;
  return true;
}

// Nanoseconds since 1970 fit 64 bits from 1678 to 2261.
constexpr int64_t first_year = 1678, last_year = 2261;

// "YYYY-MM-DD HH:MM:SS[.fraction]" (up to 9 fraction digits) as nanoseconds since 1970; sets
// `out_of_range` for a valid date outside first_year..last_year.
std::optional<int64_t> wall_clock_ns(std::string_view text, bool& out_of_range) {
  size_t pos = 0;
  int64_t year, month, day, hour, minute, second;
  if (!digits(text, pos, 4, year) || !expect(text, pos, '-') || !digits(text, pos, 2, month) ||
      !expect(text, pos, '-') || !digits(text, pos, 2, day) ||
      !(expect(text, pos, ' ') || expect(text, pos, 'T')) || !digits(text, pos, 2, hour) ||
      !expect(text, pos, ':') || !digits(text, pos, 2, minute) || !expect(text, pos, ':') ||
      !digits(text, pos, 2, second))
    return std::nullopt;
  static constexpr int64_t month_days[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (year < 1 || month < 1 || month > 12 || day < 1 ||
      day > month_days[month - 1] + (month == 2 && leap_year(year) ? 1 : 0) || hour > 23 ||
      minute > 59 || second > 59)
    return std::nullopt;
  int64_t fraction_ns = 0;
  if (pos < text.size()) {
    if (!expect(text, pos, '.'))
      return std::nullopt;
    size_t width = text.size() - pos;
    int64_t fraction;
    if (width == 0 || width > 9 || !digits(text, pos, width, fraction))
      return std::nullopt;
    fraction_ns = fraction;
    for (size_t i = width; i < 9; ++i)
      fraction_ns *= 10;
  }
  out_of_range = year < first_year || year > last_year;
  if (out_of_range)
    return std::nullopt;
  int64_t seconds =
      days_since_epoch(year, month, day) * 86400 + hour * 3600 + minute * 60 + second;
  return seconds * 1'000'000'000 + fraction_ns;
}

class azure_source final : public line_source {
 public:
  azure_source(const std::string& path, uint32_t file_index, const reader_options& options)
      : line_source(path, file_index, options) {
    std::string_view header;
    if (!next_line(header))
      throw trace_error(path, 0, "", "empty file: expected the CSV header " +
                                         std::string(azure_header));
    if (header != azure_header)
      throw trace_error(path, line_number(), "header",
                        "expected " + std::string(azure_header) + ", got " +
                            std::string(header.substr(0, 80)));
  }

  trace_format format() const override { return trace_format::azure; }

 private:
  void parse(std::string_view line, trace_request& out) override;
  [[noreturn]] void fail(std::string_view column, const std::string& message) const {
    throw trace_error(path(), line_number(), std::string(column), message);
  }
  uint32_t count(std::string_view column, std::string_view text, uint32_t min) const;

  std::optional<int64_t> first_ns_;
  int64_t last_ns_ = 0;
};

uint32_t azure_source::count(std::string_view column, std::string_view text,
                             uint32_t min) const {
  uint32_t value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < min)
    fail(column, "expected an integer from " + std::to_string(min) + " to " +
                     std::to_string(std::numeric_limits<uint32_t>::max()) + ", got '" +
                     std::string(text.substr(0, 40)) + "'");
  return value;
}

void azure_source::parse(std::string_view line, trace_request& out) {
  size_t columns = std::count(line.begin(), line.end(), ',') + 1;
  if (columns != 3)
    fail("", "expected 3 columns (" + std::string(azure_header) + "), got " +
                 std::to_string(columns));
  size_t first = line.find(',');
  size_t second = line.find(',', first + 1);
  std::string_view cells[3] = {line.substr(0, first),
                               line.substr(first + 1, second - first - 1),
                               line.substr(second + 1)};
  bool out_of_range = false;
  std::optional<int64_t> ns = wall_clock_ns(cells[0], out_of_range);
  if (out_of_range)
    fail("TIMESTAMP", "expected a date in the years " + std::to_string(first_year) + " to " +
                          std::to_string(last_year) + ", got '" +
                          std::string(cells[0].substr(0, 40)) + "'");
  if (!ns)
    fail("TIMESTAMP", "expected a time like 2023-11-16 18:17:03.9799600, got '" +
                          std::string(cells[0].substr(0, 40)) + "'");
  out.input_tokens = count("ContextTokens", cells[1], 1);
  out.output_tokens = count("GeneratedTokens", cells[2], 0);
  if (first_ns_ && *ns < last_ns_)
    fail("TIMESTAMP", std::string(cells[0]) +
                          " is earlier than the previous row (the file must be sorted by time)");
  if (!first_ns_)
    first_ns_ = *ns;
  last_ns_ = *ns;
  int64_t since_first = 0;
  if (__builtin_sub_overflow(*ns, *first_ns_, &since_first))
    fail("TIMESTAMP", std::string(cells[0]) + " is more than 292 years after the first row");
  out.arrival_ns = since_first;
}

}  // namespace

std::unique_ptr<trace_source> open_azure(const std::string& path, uint32_t file_index,
                                         const reader_options& options) {
  return std::make_unique<azure_source>(path, file_index, options);
}

}  // namespace kvtier
