#include <catch2/catch.hpp>

#include "sim/trace/trace_ids.hpp"
#include "trace_test_util.hpp"

using namespace kvtier;
using namespace kvtier::test;

namespace {

// A good line with a given timestamp: 1000 tokens are two 512-token blocks.
std::string good(int timestamp_ms) {
  return R"({"timestamp": )" + std::to_string(timestamp_ms) +
         R"(, "input_length": 1000, "output_length": 7, "hash_ids": [0, 1]})";
}

}  // namespace

TEST_CASE("mooncake: the first lines of the conversation trace", "[trace][mooncake]") {
  // Lines 1-4 and 11 of conversation_trace.jsonl.
  auto source = open_trace(data_file("mooncake_head.jsonl"), trace_format::mooncake, 0, {});
  CHECK(source->format() == trace_format::mooncake);
  auto all = read_all(*source);
  REQUIRE(all.size() == 5);

  const trace_request& first = all[0];
  CHECK(first.file == 0);
  CHECK(first.line == 1);
  CHECK(first.arrival_ns == 0);
  CHECK(first.input_tokens == 6758);
  CHECK(first.output_tokens == 500);
  CHECK(first.ids == std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13});
  CHECK(first.trace_block_size == 512);
  CHECK(first.id_space == file_id_space(0));
  CHECK(first.tokens.empty());
  CHECK(first.session == 0);
  CHECK_FALSE(first.follows_previous);

  CHECK(all[3].line == 4);
  CHECK(all[3].ids == std::vector<uint64_t>{0, 42, 43, 44, 45});  // ceil(2290 / 512) = 5

  const trace_request& last = all[4];
  CHECK(last.line == 5);
  CHECK(last.arrival_ns == 3'000'000'000);  // 3000 ms
  CHECK(last.input_tokens == 13544);
  CHECK(last.output_tokens == 71);
  REQUIRE(last.ids.size() == 27);  // ceil(13544 / 512)
  CHECK(last.ids.front() == 0);    // the shared system prompt block
  CHECK(last.ids[1] == 219);
  CHECK(last.ids.back() == 244);

  CHECK(source->skipped() == 0);
  CHECK(source->bytes_total() == 694);
  CHECK(source->bytes_read() == 694);
}

TEST_CASE("mooncake: a bad line stops the read, naming file, line and field", "[trace][mooncake]") {
  struct bad_case {
    const char* what;
    std::string line;
    std::string field;
    std::string message;  // what() after "<path>:2: "
  };
  const bad_case cases[] = {
      {"malformed JSON", R"({"timestamp": 0, "input_length": 1000,)", "",
       "malformed JSON: "},
      {"trailing garbage", good(0) + " x", "", "malformed JSON: "},
      {"not an object", "[1, 2]", "", "expected a JSON object, got an array"},
      {"missing field", R"({"timestamp": 0, "input_length": 1000, "hash_ids": [0, 1]})",
       "output_length", "field 'output_length': missing"},
      {"negative length",
       R"({"timestamp": 0, "input_length": -5, "output_length": 7, "hash_ids": []})",
       "input_length", "field 'input_length': expected an integer >= 1, got -5"},
      {"empty prompt",
       R"({"timestamp": 0, "input_length": 0, "output_length": 7, "hash_ids": []})",
       "input_length", "field 'input_length': expected an integer >= 1, got 0"},
      {"fractional length",
       R"({"timestamp": 0, "input_length": 1000, "output_length": 7.5, "hash_ids": [0, 1]})",
       "output_length", "field 'output_length': expected an integer, got 7.5"},
      {"string timestamp",
       R"({"timestamp": "0", "input_length": 1000, "output_length": 7, "hash_ids": [0, 1]})",
       "timestamp", "field 'timestamp': expected an integer, got \"0\""},
      {"hash list too short",
       R"({"timestamp": 0, "input_length": 6758, "output_length": 7, )"
       R"("hash_ids": [0,1,2,3,4,5,6,7,8,9,10,11,12]})",
       "hash_ids", "field 'hash_ids': expected 14 ids (ceil(6758/512)), got 13"},
      {"hash list too long",
       R"({"timestamp": 0, "input_length": 512, "output_length": 7, "hash_ids": [0, 1]})",
       "hash_ids", "field 'hash_ids': expected 1 ids (ceil(512/512)), got 2"},
      {"negative hash id",
       R"({"timestamp": 0, "input_length": 1000, "output_length": 7, "hash_ids": [0, -2]})",
       "hash_ids", "field 'hash_ids': element 1: expected an integer >= 0, got -2"},
      {"duplicate key",
       R"({"timestamp": 0, "timestamp": 5, "input_length": 1000, "output_length": 7, )"
       R"("hash_ids": [0, 1]})",
       "timestamp", "field 'timestamp': appears twice"},
      {"unsorted timestamps", good(0), "timestamp",
       "field 'timestamp': 0 is earlier than the previous line's 3000 (the file must be sorted "
       "by timestamp)"},
  };
  for (const bad_case& c : cases) {
    SECTION(c.what) {
      temp_trace file(good(3000) + "\n" + c.line + "\n" + good(9000) + "\n");
      trace_error e = read_error(file.path(), trace_format::mooncake);
      CHECK(e.file() == file.path());
      CHECK(e.line() == 2);
      CHECK(e.field() == c.field);
      std::string what = e.what();
      std::string expected = file.path() + ":2: " + c.message;
      if (c.message.back() == ' ')  // simdjson's own words follow
        CHECK(what.substr(0, expected.size()) == expected);
      else
        CHECK(what == expected);
    }
  }
}

TEST_CASE("mooncake: with skip_bad_lines, bad lines are skipped, counted and reported",
          "[trace][mooncake]") {
  temp_trace file(good(0) + "\n" +                                    // 1 good
                  "{\"timestamp\": 1,\n" +                            // 2 malformed
                  good(1000) + "\n" +                                 // 3 good
                  R"({"timestamp": 1000, "input_length": 1000, "output_length": 7})" "\n" +
                  good(500) + "\n" +                                  // 5 goes back in time
                  R"({"timestamp": 2000, "input_length": 1000, "output_length": 7, )"
                  R"("hash_ids": [0]})"
                  "\n" +                                              // 6 short hash list
                  good(2000) + "\n");                                 // 7 good
  reader_options options;
  options.skip_bad_lines = true;
  std::vector<trace_error> reported;
  options.on_skip = [&](const trace_error& e) { reported.push_back(e); };
  auto source = open_trace(file.path(), trace_format::mooncake, 0, options);
  auto all = read_all(*source);

  REQUIRE(all.size() == 3);
  CHECK(all[0].line == 1);
  CHECK(all[1].line == 3);
  CHECK(all[1].arrival_ns == 1'000'000'000);
  CHECK(all[2].line == 7);
  CHECK(all[2].arrival_ns == 2'000'000'000);
  CHECK(all[2].ids == std::vector<uint64_t>{0, 1});  // nothing left over from skipped lines
  CHECK(source->skipped() == 4);
  REQUIRE(reported.size() == 4);
  CHECK(reported[0].line() == 2);
  CHECK(reported[0].field().empty());
  CHECK(reported[1].line() == 4);
  CHECK(reported[1].field() == "hash_ids");
  CHECK(reported[2].line() == 5);
  CHECK(reported[2].field() == "timestamp");
  CHECK(reported[3].line() == 6);
  CHECK(reported[3].field() == "hash_ids");
}

TEST_CASE("mooncake: blank lines, CRLF, unknown keys and a missing final newline",
          "[trace][mooncake]") {
  // Blank lines carry no request and are ignored, but they still count as lines.
  temp_trace file("\n" + good(0) + "\r\n  \t\n" +
                  R"({"timestamp": 5, "input_length": 1, "output_length": 0, "hash_ids": [9], )"
                  R"("model": "x"})");
  auto source = open_trace(file.path(), trace_format::mooncake, 0, {});
  auto all = read_all(*source);
  REQUIRE(all.size() == 2);
  CHECK(all[0].line == 2);
  CHECK(all[1].line == 4);
  CHECK(all[1].arrival_ns == 5'000'000);
  CHECK(all[1].ids == std::vector<uint64_t>{9});
  CHECK(source->skipped() == 0);
  CHECK(source->bytes_read() == source->bytes_total());
}

TEST_CASE("mooncake: a line longer than one read chunk", "[trace][mooncake]") {
  // 200,000 ids make a line of about 1.4 MB, more than the 1 MiB the reader reads at a time.
  constexpr uint64_t blocks = 200'000;
  std::string line = R"({"timestamp": 0, "input_length": )" + std::to_string(blocks * 512) +
                     R"(, "output_length": 1, "hash_ids": [)";
  for (uint64_t i = 0; i < blocks; ++i)
    line += (i ? ", " : "") + std::to_string(i + 1000000);
  line += "]}";
  REQUIRE(line.size() > (size_t{1} << 20));
  temp_trace file(good(0) + "\n" + line + "\n" + good(1));
  auto all = read_all(file.path(), trace_format::mooncake);
  REQUIRE(all.size() == 3);
  REQUIRE(all[1].ids.size() == blocks);
  CHECK(all[1].ids.front() == 1000000);
  CHECK(all[1].ids.back() == 1000000 + blocks - 1);
  CHECK(all[2].line == 3);
}

TEST_CASE("mooncake: a file that cannot be opened", "[trace][mooncake]") {
  std::string path = data_file("no_such_trace.jsonl");
  try {
    open_trace(path, trace_format::mooncake, 0, {});
    FAIL("expected a trace_error");
  } catch (const trace_error& e) {
    CHECK(e.file() == path);
    CHECK(e.line() == 0);
    CHECK(std::string(e.what()) == path + ": cannot open: No such file or directory");
  }
}
