#include <catch2/catch.hpp>

#include "trace_test_util.hpp"

using namespace kvtier;
using namespace kvtier::test;

namespace {

const std::string header = "TIMESTAMP,ContextTokens,GeneratedTokens\n";

}  // namespace

TEST_CASE("azure: the first rows of the code trace", "[trace][azure]") {
  // The header and rows 1-4 of AzureLLMInferenceTrace_code.csv, CRLF line ends included.
  auto source = open_trace(data_file("azure_head.csv"), trace_format::azure, 2, {});
  CHECK(source->format() == trace_format::azure);
  auto all = read_all(*source);
  REQUIRE(all.size() == 4);
  // 18:17:03.9799600, 04.0319600, 04.0781490, 04.1206440: relative to the first row, exact.
  CHECK(all[0].arrival_ns == 0);
  CHECK(all[1].arrival_ns == 52'000'000);
  CHECK(all[2].arrival_ns == 98'189'000);
  CHECK(all[3].arrival_ns == 140'684'000);
  CHECK(all[0].line == 2);  // line 1 is the header
  CHECK(all[3].line == 5);
  CHECK(all[0].input_tokens == 4808);
  CHECK(all[0].output_tokens == 10);
  CHECK(all[3].input_tokens == 7433);
  CHECK(all[3].output_tokens == 14);
  for (const trace_request& r : all) {
    CHECK(r.file == 2);
    CHECK(r.ids.empty());  // no prefix information
    CHECK(r.tokens.empty());
    CHECK(r.trace_block_size == 0);
    CHECK(r.session == 0);
  }
  CHECK(source->bytes_read() == 187);
}

TEST_CASE("azure: time arithmetic is exact across days, months, leap days and years",
          "[trace][azure]") {
  temp_trace file(header +
                  "2024-02-28 23:59:59.9999999,1,0\n"  // 100 ns before the leap day
                  "2024-02-29 00:00:00.0000000,1,0\n"
                  "2024-03-01 00:00:00,1,0\n"           // no fraction at all
                  "2024-03-01 00:00:00.5,1,0\n"         // one digit: half a second
                  "2024-12-31 23:59:59.123456789,1,0\n" // nanosecond digits
                  "2025-01-01 00:00:00.0000001,1,0\n",
                  ".csv");
  auto all = read_all(file.path(), trace_format::azure);
  REQUIRE(all.size() == 6);
  constexpr int64_t s = 1'000'000'000;
  constexpr int64_t day = 86'400 * s;
  CHECK(all[1].arrival_ns == 100);
  CHECK(all[2].arrival_ns == day + 100);
  CHECK(all[3].arrival_ns == day + 100 + s / 2);
  // 2024-03-01 to 2024-12-31 is 305 days; the first row was 100 ns before 2024-02-29.
  CHECK(all[4].arrival_ns == 100 + day + 305 * day + (day - s) + 123'456'789);
  CHECK(all[5].arrival_ns == 100 + day + 306 * day + 100);
}

TEST_CASE("azure: a bad row stops the read, naming the column", "[trace][azure]") {
  struct bad_case {
    const char* what;
    std::string row;
    std::string field;
    std::string message;  // what() after "<path>:3: "
  };
  const bad_case cases[] = {
      {"too few columns", "2023-11-16 18:17:04.0,5", "",
       "expected 3 columns (TIMESTAMP,ContextTokens,GeneratedTokens), got 2"},
      {"too many columns", "2023-11-16 18:17:04.0,5,6,7", "",
       "expected 3 columns (TIMESTAMP,ContextTokens,GeneratedTokens), got 4"},
      {"month 13", "2023-13-16 18:17:04.0,5,6", "TIMESTAMP",
       "field 'TIMESTAMP': expected a time like 2023-11-16 18:17:03.9799600, got "
       "'2023-13-16 18:17:04.0'"},
      {"February 30th", "2023-02-30 18:17:04.0,5,6", "TIMESTAMP",
       "field 'TIMESTAMP': expected a time like 2023-11-16 18:17:03.9799600, got "
       "'2023-02-30 18:17:04.0'"},
      {"ten fraction digits", "2023-11-16 18:17:04.0000000000,5,6", "TIMESTAMP",
       "field 'TIMESTAMP': expected a time like 2023-11-16 18:17:03.9799600, got "
       "'2023-11-16 18:17:04.0000000000'"},
      {"text tokens", "2023-11-16 18:17:04.0,abc,6", "ContextTokens",
       "field 'ContextTokens': expected an integer from 1 to 4294967295, got 'abc'"},
      {"empty prompt", "2023-11-16 18:17:04.0,0,6", "ContextTokens",
       "field 'ContextTokens': expected an integer from 1 to 4294967295, got '0'"},
      {"negative output", "2023-11-16 18:17:04.0,5,-1", "GeneratedTokens",
       "field 'GeneratedTokens': expected an integer from 0 to 4294967295, got '-1'"},
      {"going back in time", "2023-11-16 18:17:03.0,5,6", "TIMESTAMP",
       "field 'TIMESTAMP': 2023-11-16 18:17:03.0 is earlier than the previous row (the file "
       "must be sorted by time)"},
  };
  for (const bad_case& c : cases) {
    SECTION(c.what) {
      temp_trace file(header + "2023-11-16 18:17:03.9799600,4808,10\n" + c.row + "\n", ".csv");
      trace_error e = read_error(file.path(), trace_format::azure);
      CHECK(e.line() == 3);
      CHECK(e.field() == c.field);
      CHECK(std::string(e.what()) == file.path() + ":3: " + c.message);
    }
  }
}

TEST_CASE("azure: the header is required, even when skipping bad rows", "[trace][azure]") {
  temp_trace file("2023-11-16 18:17:03.9799600,4808,10\n", ".csv");
  reader_options skip;
  skip.skip_bad_lines = true;
  try {
    open_trace(file.path(), trace_format::azure, 0, skip);
    FAIL("expected a trace_error");
  } catch (const trace_error& e) {
    CHECK(e.line() == 1);
    CHECK(e.field() == "header");
    CHECK(std::string(e.what()) ==
          file.path() + ":1: field 'header': expected TIMESTAMP,ContextTokens,GeneratedTokens, "
                        "got 2023-11-16 18:17:03.9799600,4808,10");
  }
  temp_trace empty("", ".csv");
  try {
    open_trace(empty.path(), trace_format::azure, 0, skip);
    FAIL("expected a trace_error");
  } catch (const trace_error& e) {
    CHECK(e.line() == 0);
  }
}

TEST_CASE("azure: with skip_bad_lines, times count from the first good row", "[trace][azure]") {
  temp_trace file(header +
                  "yesterday,1,1\n"                       // 2 bad time
                  "2023-11-16 18:00:00.0,100,1\n"         // 3 the first good row
                  "2023-11-16 18:00:01.0,x,1\n"           // 4 bad ContextTokens
                  "2023-11-16 17:00:00.0,100,1\n"         // 5 before the previous row
                  "2023-11-16 18:00:02.0,200,2\n",        // 6 good
                  ".csv");
  reader_options options;
  options.skip_bad_lines = true;
  auto source = open_trace(file.path(), trace_format::azure, 0, options);
  auto all = read_all(*source);
  REQUIRE(all.size() == 2);
  CHECK(all[0].line == 3);
  CHECK(all[0].arrival_ns == 0);
  CHECK(all[1].line == 6);
  CHECK(all[1].arrival_ns == 2'000'000'000);
  CHECK(all[1].input_tokens == 200);
  CHECK(source->skipped() == 3);
}
