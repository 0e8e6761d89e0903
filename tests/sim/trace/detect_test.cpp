#include <catch2/catch.hpp>

#include "trace_test_util.hpp"

using namespace kvtier;
using namespace kvtier::test;

TEST_CASE("detect: each format is told from its first bytes", "[trace][detect]") {
  CHECK(detect_format(data_file("mooncake_head.jsonl")) == trace_format::mooncake);
  CHECK(detect_format(data_file("azure_head.csv")) == trace_format::azure);
  CHECK(detect_format(data_file("native_hashes.jsonl")) == trace_format::native);
  CHECK(detect_format(data_file("native_tokens.jsonl")) == trace_format::native);
  // Pretty-printed over many lines: its first line is no JSON object, so the whole file is read.
  CHECK(detect_format(data_file("agentic_subagent.json")) == trace_format::agentic);
  // On one line, as the published files are.
  temp_trace one_line(R"({"block_size": 64, "requests": []})", ".json");
  CHECK(detect_format(one_line.path()) == trace_format::agentic);
  // Blank lines and a byte order mark before the first line do not matter.
  temp_trace padded("\xEF\xBB\xBF\n\n"
                    R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [0]})");
  CHECK(detect_format(padded.path()) == trace_format::mooncake);
}

TEST_CASE("detect: auto-detection opens the right reader", "[trace][detect]") {
  auto source = open_trace(data_file("azure_head.csv"), trace_format::detect, 0, {});
  CHECK(source->format() == trace_format::azure);
  CHECK(read_all(*source).size() == 4);
  source = open_trace(data_file("agentic_subagent.json"), trace_format::detect, 0, {});
  CHECK(source->format() == trace_format::agentic);
  CHECK(read_all(*source).size() == 7);
}

TEST_CASE("detect: an unknown format says what was tried", "[trace][detect]") {
  const std::string tried =
      ": cannot detect the format: tried azure (a CSV header TIMESTAMP,...), native (a first "
      "line with \"kvtier_trace\"), mooncake (a first line with \"timestamp\" and "
      "\"hash_ids\") and agentic (a JSON document with \"requests\"), but ";
  struct bad_case {
    const char* what;
    std::string text;
    std::string reason;
  };
  const bad_case cases[] = {
      {"other CSV", "time,tokens\n1,2\n",
       "its first line is neither a CSV header nor a JSON object"},
      {"other JSON lines", R"({"timestamp": 0, "input_length": 5})" "\n",
       "its first line is a JSON object without those keys"},
      {"JSON document without requests", "{\n\"conversations\": []\n}",
       "it is a JSON document without \"requests\""},
  };
  for (const bad_case& c : cases) {
    SECTION(c.what) {
      temp_trace file(c.text);
      try {
        detect_format(file.path());
        FAIL("expected a trace_error");
      } catch (const trace_error& e) {
        CHECK(e.line() == 0);
        CHECK(std::string(e.what()) == file.path() + tried + c.reason +
                                           "; name the format with --format");
      }
    }
  }
  SECTION("broken JSON") {
    temp_trace file("{\"requests\": [\n");
    try {
      detect_format(file.path());
      FAIL("expected a trace_error");
    } catch (const trace_error& e) {
      std::string expected =
          file.path() + tried + "its first line is not a whole JSON object, nor is the file (";
      CHECK(std::string(e.what()).substr(0, expected.size()) == expected);
    }
  }
  SECTION("empty file") {
    temp_trace file(" \n\n");
    try {
      detect_format(file.path());
      FAIL("expected a trace_error");
    } catch (const trace_error& e) {
      CHECK(std::string(e.what()) ==
            file.path() + ": the file is empty, so its format cannot be detected");
    }
  }
  SECTION("missing file") {
    std::string path = data_file("missing.jsonl");
    try {
      detect_format(path);
      FAIL("expected a trace_error");
    } catch (const trace_error& e) {
      CHECK(e.line() == 0);
      CHECK(std::string(e.what()) == path + ": cannot open: No such file or directory");
    }
  }
}

TEST_CASE("detect: --format names", "[trace][detect]") {
  CHECK(parse_trace_format("auto") == trace_format::detect);
  CHECK(parse_trace_format("mooncake") == trace_format::mooncake);
  CHECK(parse_trace_format("azure") == trace_format::azure);
  CHECK(parse_trace_format("agentic") == trace_format::agentic);
  CHECK(parse_trace_format("native") == trace_format::native);
  CHECK_FALSE(parse_trace_format("Mooncake"));
  CHECK_FALSE(parse_trace_format("csv"));
  CHECK_FALSE(parse_trace_format(""));
  for (auto f : {trace_format::detect, trace_format::mooncake, trace_format::azure,
                 trace_format::agentic, trace_format::native})
    CHECK(parse_trace_format(to_string(f)) == f);
}
