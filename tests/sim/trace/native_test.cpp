#include <catch2/catch.hpp>

#include "sim/trace/trace_ids.hpp"
#include "trace_test_util.hpp"

using namespace kvtier;
using namespace kvtier::test;

namespace {

constexpr int64_t ms = 1'000'000;
const std::string header = R"({"kvtier_trace": 1, "block_size": 16})" "\n";

}  // namespace

TEST_CASE("native: block hashes, sessions and think times", "[trace][native]") {
  auto source = open_trace(data_file("native_hashes.jsonl"), trace_format::native, 0, {});
  CHECK(source->format() == trace_format::native);
  auto all = read_all(*source);
  REQUIRE(all.size() == 5);
  const uint64_t a = file_session_id(0, 1);  // sessions are numbered by first appearance
  const uint64_t seven = file_session_id(0, 2);

  CHECK(all[0].line == 2);  // line 1 is the header
  CHECK(all[0].arrival_ns == 0);
  CHECK(all[0].input_tokens == 40);
  CHECK(all[0].output_tokens == 8);
  CHECK(all[0].ids == std::vector<uint64_t>{11, 12, 13});  // ceil(40 / 16)
  CHECK(all[0].trace_block_size == 16);
  CHECK(all[0].id_space == file_id_space(0));
  CHECK(all[0].session == a);
  CHECK(all[0].turn == 0);
  CHECK_FALSE(all[0].follows_previous);

  CHECK(all[1].line == 3);
  CHECK(all[1].arrival_ns == 250 * ms);
  CHECK(all[1].ids == std::vector<uint64_t>{21, 18446744073709551615ULL});  // full 64 bits
  CHECK(all[1].session == seven);
  CHECK(all[1].turn == 0);

  CHECK(all[2].line == 5);  // line 4 is blank
  CHECK(all[2].arrival_ns == 1500 * ms);
  CHECK(all[2].ids == std::vector<uint64_t>{11, 12, 13});  // floor(50 / 16)
  CHECK(all[2].session == a);
  CHECK(all[2].turn == 1);
  CHECK(all[2].follows_previous);
  CHECK(all[2].think_ns == 750 * ms);
  CHECK(all[2].parent_session == 0);

  // "session": "7" is the same session as "session": 7; no block identity on this line.
  CHECK(all[3].line == 6);
  CHECK(all[3].arrival_ns == 2000 * ms);
  CHECK(all[3].ids.empty());
  CHECK(all[3].trace_block_size == 0);
  CHECK(all[3].session == seven);
  CHECK(all[3].turn == 1);
  CHECK(all[3].follows_previous);
  CHECK(all[3].think_ns == 1000 * ms);

  CHECK(all[4].line == 7);
  CHECK(all[4].session == 0);  // no session, no dependency
  CHECK(all[4].turn == 0);
  CHECK_FALSE(all[4].follows_previous);
  CHECK(source->skipped() == 0);
}

TEST_CASE("native: token ids", "[trace][native]") {
  auto all = read_all(data_file("native_tokens.jsonl"), trace_format::native);
  REQUIRE(all.size() == 3);
  CHECK(all[0].arrival_ns == 1 * ms);
  CHECK(all[0].tokens == std::vector<int32_t>{1, 2, 3, 4, 5});
  CHECK(all[0].ids.empty());
  CHECK(all[0].trace_block_size == 0);
  CHECK(all[0].session == file_session_id(0, 1));
  CHECK(all[1].tokens == std::vector<int32_t>{9, 8, 7});
  CHECK(all[1].session == 0);
  CHECK(all[2].arrival_ns == 3'000'000'001);  // rounded to whole nanoseconds
  CHECK(all[2].tokens == std::vector<int32_t>{1, 2, 3, 4, 5, 0, 2147483647});
  CHECK(all[2].session == file_session_id(0, 1));
  CHECK(all[2].turn == 1);
  CHECK(all[2].follows_previous);
  CHECK(all[2].think_ns == 2500 * ms);
}

TEST_CASE("native: global hash scope shares one id space across files", "[trace][native]") {
  const std::string line = R"({"arrival_s": 0, "input_length": 16, "output_length": 1, )"
                           R"("block_hashes": [5]})";
  temp_trace global(R"({"kvtier_trace": 1, "block_size": 16, "hash_scope": "global"})" "\n" +
                    line);
  temp_trace local(R"({"kvtier_trace": 1, "block_size": 16, "hash_scope": "file"})" "\n" +
                   line);
  auto in_file_1 = read_all(*open_trace(global.path(), trace_format::native, 1, {}));
  auto in_file_4 = read_all(*open_trace(global.path(), trace_format::native, 4, {}));
  auto local_4 = read_all(*open_trace(local.path(), trace_format::native, 4, {}));
  REQUIRE(in_file_1.size() == 1);
  REQUIRE(in_file_4.size() == 1);
  REQUIRE(local_4.size() == 1);
  CHECK(in_file_1[0].id_space == global_id_space);
  CHECK(in_file_4[0].id_space == global_id_space);
  CHECK(local_4[0].id_space == file_id_space(4));
  CHECK(local_4[0].id_space != global_id_space);
}

TEST_CASE("native: a bad line stops the read, naming the field", "[trace][native]") {
  const std::string first =
      R"({"arrival_s": 1, "input_length": 40, "output_length": 1, "session": "a"})";
  struct bad_case {
    const char* what;
    std::string line;
    std::string field;
    std::string message;  // what() after "<path>:3: field '<field>': "
  };
  const bad_case cases[] = {
      {"misspelt key", R"({"arival_s": 1, "input_length": 40, "output_length": 1})",
       "arival_s",
       "unknown field (expected arrival_s, input_length, output_length, block_hashes, tokens, "
       "session, think_time_s)"},
      {"missing length", R"({"arrival_s": 1, "output_length": 1})", "input_length", "missing"},
      {"negative arrival", R"({"arrival_s": -1, "input_length": 40, "output_length": 1})",
       "arrival_s", "expected a number of seconds >= 0, got -1"},
      {"arrival going back", R"({"arrival_s": 0.5, "input_length": 40, "output_length": 1})",
       "arrival_s", "earlier than the previous line (the file must be sorted by arrival)"},
      {"hashes and tokens",
       R"({"arrival_s": 1, "input_length": 1, "output_length": 1, "block_hashes": [], )"
       R"("tokens": [1]})",
       "tokens", "a line carries block_hashes or tokens, not both"},
      {"wrong hash count",
       R"({"arrival_s": 1, "input_length": 40, "output_length": 1, "block_hashes": [1]})",
       "block_hashes", "expected 2 or 3 hashes (input_length 40 / block_size 16), got 1"},
      {"wrong hash count, whole blocks",
       R"({"arrival_s": 1, "input_length": 32, "output_length": 1, "block_hashes": [1, 2, 3]})",
       "block_hashes", "expected 2 hashes (input_length 32 / block_size 16), got 3"},
      {"wrong token count",
       R"({"arrival_s": 1, "input_length": 5, "output_length": 1, "tokens": [1, 2, 3, 4]})",
       "tokens", "expected 5 token ids (input_length), got 4"},
      {"negative token",
       R"({"arrival_s": 1, "input_length": 1, "output_length": 1, "tokens": [-1]})", "tokens",
       "element 0: expected a token id from 0 to 2147483647, got -1"},
      {"session of another type",
       R"({"arrival_s": 1, "input_length": 1, "output_length": 1, "session": true})", "session",
       "expected a string or an integer, got true"},
      {"think time without session",
       R"({"arrival_s": 1, "input_length": 1, "output_length": 1, "think_time_s": 1})",
       "think_time_s",
       "needs \"session\": it is the time after the previous line of the same session finished"},
      {"first line of a session follows",
       R"({"arrival_s": 1, "input_length": 1, "output_length": 1, "session": "b", )"
       R"("think_time_s": 1})",
       "think_time_s", "the first line of session \"b\" cannot follow an earlier line"},
  };
  for (const bad_case& c : cases) {
    SECTION(c.what) {
      temp_trace file(header + first + "\n" + c.line + "\n");
      trace_error e = read_error(file.path(), trace_format::native);
      CHECK(e.line() == 3);
      CHECK(e.field() == c.field);
      CHECK(std::string(e.what()) ==
            file.path() + ":3: field '" + c.field + "': " + c.message);
    }
  }
}

TEST_CASE("native: block hashes need a block size in the header", "[trace][native]") {
  temp_trace file(R"({"kvtier_trace": 1})" "\n"
                  R"({"arrival_s": 0, "input_length": 16, "output_length": 1, )"
                  R"("block_hashes": [5]})");
  trace_error e = read_error(file.path(), trace_format::native);
  CHECK(std::string(e.what()) ==
        file.path() + ":2: field 'block_hashes': needs \"block_size\" in the header");
}

TEST_CASE("native: a bad header fails the file, even when skipping", "[trace][native]") {
  struct bad_case {
    const char* what;
    std::string header;
    uint64_t line;
    std::string message;  // what() after "<path>"
  };
  const bad_case cases[] = {
      {"empty file", "", 0, ": empty file: expected the header {\"kvtier_trace\": 1, ...}"},
      {"no header", R"({"arrival_s": 0, "input_length": 16, "output_length": 1})", 1,
       ":1: field 'kvtier_trace': missing: the first line of a native trace must be its header"},
      {"version 2", R"({"kvtier_trace": 2})", 1,
       ":1: field 'kvtier_trace': unsupported version 2 (this reader knows 1)"},
      {"unknown scope", R"({"kvtier_trace": 1, "hash_scope": "world"})", 1,
       ":1: field 'hash_scope': expected \"file\" or \"global\", got \"world\""},
      {"unknown key", R"({"kvtier_trace": 1, "blocksize": 16})", 1,
       ":1: field 'blocksize': unknown header field (expected kvtier_trace, block_size, "
       "hash_scope)"},
      {"zero block size", R"({"kvtier_trace": 1, "block_size": 0})", 1,
       ":1: field 'block_size': expected an integer >= 1, got 0"},
  };
  reader_options skip;
  skip.skip_bad_lines = true;
  for (const bad_case& c : cases) {
    SECTION(c.what) {
      temp_trace file(c.header);
      try {
        open_trace(file.path(), trace_format::native, 0, skip);
        FAIL("expected a trace_error");
      } catch (const trace_error& e) {
        CHECK(e.line() == c.line);
        CHECK(std::string(e.what()) == file.path() + c.message);
      }
    }
  }
}

TEST_CASE("native: a skipped line takes no turn of its session", "[trace][native]") {
  temp_trace file(header +
                  R"({"arrival_s": 0, "input_length": 4, "output_length": 1, "session": "a"})"
                  "\n"
                  R"({"arrival_s": 1, "input_length": 4, "output_length": 1, "session": "a", )"
                  R"("think_time_s": 1, "tokens": [1]})" "\n"  // wrong token count
                  R"({"arrival_s": 2, "input_length": 4, "output_length": 1, "session": "b", )"
                  R"("think_time_s": 1})" "\n"  // b has no earlier line
                  R"({"arrival_s": 3, "input_length": 4, "output_length": 1, "session": "a", )"
                  R"("think_time_s": 2})" "\n"
                  R"({"arrival_s": 4, "input_length": 4, "output_length": 1, "session": "b"})");
  reader_options options;
  options.skip_bad_lines = true;
  auto source = open_trace(file.path(), trace_format::native, 0, options);
  auto all = read_all(*source);
  REQUIRE(all.size() == 3);
  CHECK(all[0].line == 2);
  CHECK(all[1].line == 5);
  CHECK(all[1].session == file_session_id(0, 1));
  CHECK(all[1].turn == 1);
  CHECK(all[1].think_ns == 2000 * ms);
  CHECK(all[2].line == 6);
  CHECK(all[2].session == file_session_id(0, 2));  // "b" begins here, as its turn 0
  CHECK(all[2].turn == 0);
  CHECK_FALSE(all[2].follows_previous);
  CHECK(source->skipped() == 2);
}
