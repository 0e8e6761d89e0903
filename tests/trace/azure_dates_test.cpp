// Azure dates outside what 64-bit nanoseconds hold are refused where they are, not overflowed.

#include <catch2/catch.hpp>

#include "trace_test_util.hpp"

using namespace kvtier;
using namespace kvtier::test;

TEST_CASE("azure: dates outside 1678-2261, or too far apart, are refused", "[trace][azure]") {
  const std::string header = "TIMESTAMP,ContextTokens,GeneratedTokens\n";
  for (const char* date : {"0001-01-01 00:00:00", "1677-12-31 23:59:59", "2262-01-01 00:00:00",
                           "9999-12-31 23:59:59", "4046-11-16 18:15:46.6805900"}) {
    INFO(date);
    temp_trace file(header + date + ",1,0\n", ".csv");
    trace_error e = read_error(file.path(), trace_format::azure);
    CHECK(e.line() == 2);
    CHECK(e.field() == "TIMESTAMP");
    CHECK(std::string(e.what()).find("1678 to 2261") != std::string::npos);
  }
  // Each in range, but 500 years apart: times relative to the first row would overflow.
  temp_trace apart(header + "1700-01-01 00:00:00,1,0\n2200-01-01 00:00:00,1,0\n", ".csv");
  trace_error e = read_error(apart.path(), trace_format::azure);
  CHECK(e.line() == 3);
  CHECK(e.field() == "TIMESTAMP");
  CHECK(std::string(e.what()).find("292 years") != std::string::npos);
  // The edges themselves read.
  temp_trace edges(header + "1678-01-01 00:00:00,1,0\n1678-01-02 00:00:00,1,0\n", ".csv");
  CHECK(read_all(edges.path(), trace_format::azure)[1].arrival_ns == 86'400'000'000'000);
}
