#include <catch2/catch.hpp>

#include "sim/trace/trace_ids.hpp"
#include "trace_test_util.hpp"

using namespace kvtier;
using namespace kvtier::test;

namespace {

constexpr int64_t ms = 1'000'000;

// An agentic document around the given request list.
std::string document(const std::string& requests) {
  return R"({"id": "t", "block_size": 64, "hash_id_scope": "local", "requests": [)" + requests +
         "]}";
}

struct expected {
  uint64_t line;
  int64_t arrival_ms;
  uint32_t input_tokens;
  uint32_t output_tokens;
  std::vector<uint64_t> ids;
  uint32_t session;  // number within the file: 1 is the main conversation
  uint32_t turn;
  bool follows_previous;
  int64_t think_ms;
  uint32_t parent_session;  // 0: none
  uint32_t parent_turn;
};

void check(const trace_request& r, const expected& e, uint32_t file) {
  INFO("request from line " << e.line);
  CHECK(r.file == file);
  CHECK(r.line == e.line);
  CHECK(r.arrival_ns == e.arrival_ms * ms);
  CHECK(r.input_tokens == e.input_tokens);
  CHECK(r.output_tokens == e.output_tokens);
  CHECK(r.ids == e.ids);
  CHECK(r.trace_block_size == 64);
  CHECK(r.id_space == file_id_space(file));
  CHECK(r.tokens.empty());
  CHECK(r.session == file_session_id(file, e.session));
  CHECK(r.turn == e.turn);
  CHECK(r.follows_previous == e.follows_previous);
  CHECK(r.think_ns == e.think_ms * ms);
  CHECK(r.parent_session == (e.parent_session ? file_session_id(file, e.parent_session) : 0));
  CHECK(r.parent_turn == e.parent_turn);
}

}  // namespace

TEST_CASE("agentic: a conversation with a sub-agent is flattened by time into sessions",
          "[trace][agentic]") {
  // Document order: main 0 (t 0), main 1 (t 10), sub-agent at t 12.5 with requests at +0 and
  // +4, main 2 (t 15), main 3 (t 16.5), main 4 (t 20). Request numbers follow that order.
  auto source = open_trace(data_file("agentic_subagent.json"), trace_format::agentic, 0, {});
  CHECK(source->format() == trace_format::agentic);
  auto all = read_all(*source);
  REQUIRE(all.size() == 7);
  // clang-format off
  const expected want[] = {
    // line  t ms  in   out  ids           ses turn follows think  parent
    {1,      0,    130, 20,  {1, 2},       1,  0,   false,  0,     0, 0},
    {2,  10000,    200, 30,  {1, 2, 3},    1,  1,   true,   7500,  0, 0},   // its think_time
    // The sub-agent starts 1.25 s after main turn 1 finished (t 10 + api_time 1.25).
    {3,  12500,    64,  5,   {10},         2,  0,   true,   1250,  1, 1},
    // No think_time: the recorded gap after main turn 1 (15 - 11.25); the sub-agent between
    // them is another session.
    {5,  15000,    270, 40,  {1, 2, 3, 4}, 1,  2,   true,   3750,  0, 0},
    // A tie at 16.5 s keeps document order: the sub-agent's second request first.
    {4,  16500,    128, 6,   {10, 11},     2,  1,   true,   3000,  0, 0},
    {6,  16500,    200, 1,   {1, 7, 8},    1,  3,   true,   0,     0, 0},
    // in 63 is less than one full block: no ids. think_time and api_time of main turn 3 are
    // null and absent: the gap after main turn 3 counts, its api_time as 0 (20 - 16.5).
    {7,  20000,    63,  0,   {},           1,  4,   true,   3500,  0, 0},
  };
  // clang-format on
  for (size_t i = 0; i < all.size(); ++i)
    check(all[i], want[i], 0);
  CHECK(source->skipped() == 0);
  CHECK(source->bytes_read() == source->bytes_total());
  CHECK(source->bytes_total() > 0);
}

TEST_CASE("agentic: sessions and id spaces depend on the file index", "[trace][agentic]") {
  auto all = read_all(*open_trace(data_file("agentic_subagent.json"), trace_format::agentic, 5,
                                  {}));
  REQUIRE(all.size() == 7);
  CHECK(all[0].session == (uint64_t{6} << 32 | 1));
  CHECK(all[2].session == (uint64_t{6} << 32 | 2));
  CHECK(all[2].parent_session == (uint64_t{6} << 32 | 1));
  CHECK(all[0].id_space == file_id_space(5));
  CHECK(file_id_space(5) != file_id_space(0));
}

TEST_CASE("agentic: a bad request stops the read, naming its number and field",
          "[trace][agentic]") {
  const std::string ok0 = R"({"t": 0, "type": "n", "in": 128, "out": 1, "hash_ids": [1, 2]})";
  const std::string ok10 = R"({"t": 10, "type": "n", "in": 128, "out": 1, "hash_ids": [1, 2]})";
  struct bad_case {
    const char* what;
    std::string requests;
    uint64_t line;
    std::string field;
    std::string message;  // what() after "<path>:<line>: "
  };
  const bad_case cases[] = {
      {"short hash list",
       ok0 + R"(, {"t": 1, "type": "n", "in": 200, "out": 1, "hash_ids": [1, 2]})", 2,
       "requests[1].hash_ids",
       "field 'requests[1].hash_ids': expected 3 ids (floor(200/64)), got 2"},
      {"bad length in a sub-agent",
       ok0 + R"(, {"t": 1, "type": "subagent", "requests": [)" + ok0 +
           R"(, {"t": 1, "type": "n", "in": -1, "out": 1, "hash_ids": []}]})",
       3, "requests[1].requests[1].in",
       "field 'requests[1].requests[1].in': expected an integer >= 1, got -1"},
      {"missing time", R"({"type": "n", "in": 128, "out": 1, "hash_ids": [1, 2]})", 1,
       "requests[0].t", "field 'requests[0].t': missing"},
      {"missing type", R"({"t": 0, "in": 128, "out": 1, "hash_ids": [1, 2]})", 1,
       "requests[0].type", "field 'requests[0].type': missing"},
      {"not an object", ok0 + ", 5", 2, "requests[1]",
       "field 'requests[1]': expected an object, got 5"},
      {"negative think time",
       ok0 + R"(, {"t": 1, "type": "n", "in": 64, "out": 1, "hash_ids": [1], "think_time": -2})",
       2, "requests[1].think_time",
       "field 'requests[1].think_time': expected a number of seconds >= 0, got -2"},
      {"time going back", ok10 + ", " + ok0, 2, "requests[1].t",
       "field 'requests[1].t': earlier than the previous request of its conversation"},
      {"sub-agent before its parent",
       ok10 + R"(, {"t": 5, "type": "subagent", "requests": [)" + ok0 + "]}", 2, "requests[1].t",
       "field 'requests[1].t': the sub-agent starts before the request it follows"},
      {"nested sub-agent",
       ok0 + R"(, {"t": 1, "type": "subagent", "requests": [{"t": 0, "type": "subagent", )"
             R"("requests": []}]})",
       2, "requests[1].requests[0].type",
       "field 'requests[1].requests[0].type': a sub-agent inside a sub-agent is not supported"},
  };
  for (const bad_case& c : cases) {
    SECTION(c.what) {
      temp_trace file(document(c.requests), ".json");
      trace_error e = read_error(file.path(), trace_format::agentic);
      CHECK(e.file() == file.path());
      CHECK(e.line() == c.line);
      CHECK(e.field() == c.field);
      CHECK(std::string(e.what()) == file.path() + ":" + std::to_string(c.line) + ": " +
                                         c.message);
    }
  }
}

TEST_CASE("agentic: a bad document fails as a whole, even when skipping", "[trace][agentic]") {
  struct bad_case {
    const char* what;
    std::string text;
    std::string field;
    std::string message;  // what() after "<path>: "
  };
  const bad_case cases[] = {
      {"malformed JSON", R"({"block_size": 64, "requests": [)", "", "malformed JSON: "},
      {"not an object", "[]", "", "expected an object, got an array"},
      {"no block size", R"({"requests": []})", "block_size", "field 'block_size': missing"},
      {"global ids", R"({"block_size": 64, "hash_id_scope": "global", "requests": []})",
       "hash_id_scope",
       "field 'hash_id_scope': only \"local\" is supported, got \"global\""},
      {"requests not a list", R"({"block_size": 64, "requests": {}})", "requests",
       "field 'requests': expected an array, got an object"},
  };
  reader_options skip;
  skip.skip_bad_lines = true;
  for (const bad_case& c : cases) {
    SECTION(c.what) {
      temp_trace file(c.text, ".json");
      try {
        open_trace(file.path(), trace_format::agentic, 0, skip);
        FAIL("expected a trace_error");
      } catch (const trace_error& e) {
        CHECK(e.line() == 0);
        CHECK(e.field() == c.field);
        std::string expected = file.path() + ": " + c.message;
        std::string what = e.what();
        if (c.message.back() == ' ')  // simdjson's own words follow
          CHECK(what.substr(0, expected.size()) == expected);
        else
          CHECK(what == expected);
      }
    }
  }
}

TEST_CASE("agentic: skipped requests and sub-agents leave numbering and turns consistent",
          "[trace][agentic]") {
  temp_trace file(document(
      R"({"t": 0, "type": "n", "in": 128, "out": 1, "hash_ids": [1, 2], "api_time": 1},)"
      R"({"t": 5, "type": "n", "in": 128, "out": 1, "hash_ids": [1]},)"  // #2 short list
      R"({"t": 6, "type": "n", "in": 192, "out": 1, "hash_ids": [1, 2, 3], "think_time": 2},)"
      R"({"t": "soon", "type": "subagent", "requests": [)"  // bad entry: #4 and #5 skipped
      R"(  {"t": 0, "type": "n", "in": 64, "out": 1, "hash_ids": [5]},)"
      R"(  {"t": 1, "type": "n", "in": 64, "out": 1, "hash_ids": [5]}]},)"
      R"({"t": 7, "type": "subagent", "requests": [)"
      R"(  {"t": 0, "type": "n", "in": 64, "out": 1, "hash_ids": [9]},)"   // #6
      R"(  {"t": 1, "type": "n", "in": 64, "out": 1, "hash_ids": []},)"    // #7 short list
      R"(  {"t": 2, "type": "n", "in": 64, "out": 1, "hash_ids": [9], "think_time": 1}]},)"
      R"({"t": 8, "type": "n", "in": 192, "out": 1, "hash_ids": [1, 2, 3], "think_time": 0.5})"),
      ".json");
  reader_options options;
  options.skip_bad_lines = true;
  std::vector<trace_error> reported;
  options.on_skip = [&](const trace_error& e) { reported.push_back(e); };
  auto source = open_trace(file.path(), trace_format::agentic, 0, options);
  auto all = read_all(*source);
  // clang-format off
  const expected want[] = {
    // line  t ms  in   out ids        ses turn follows think parent
    {1,      0,    128, 1,  {1, 2},    1,  0,   false,  0,    0, 0},
    {3,   6000,    192, 1,  {1, 2, 3}, 1,  1,   true,   2000, 0, 0},  // turn 1: #2 was skipped
    {6,   7000,    64,  1,  {9},       2,  0,   true,   1000, 1, 1},  // 7 - (6 + no api_time)
    {9,   8000,    192, 1,  {1, 2, 3}, 1,  2,   true,   500,  0, 0},
    {8,   9000,    64,  1,  {9},       2,  1,   true,   1000, 0, 0},
  };
  // clang-format on
  REQUIRE(all.size() == 5);
  for (size_t i = 0; i < all.size(); ++i)
    check(all[i], want[i], 0);
  CHECK(source->skipped() == 3);
  REQUIRE(reported.size() == 3);
  CHECK(reported[0].line() == 2);
  CHECK(reported[0].field() == "requests[1].hash_ids");
  CHECK(reported[1].line() == 4);  // the number its first request would have had
  CHECK(reported[1].field() == "requests[3].t");
  CHECK(reported[2].line() == 7);
  CHECK(reported[2].field() == "requests[4].requests[1].hash_ids");
}
