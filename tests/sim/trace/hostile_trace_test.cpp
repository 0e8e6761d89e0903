// Trace inputs that other people's pipelines produce and that once slipped through: dates far
// from 1970, byte order marks, repeated keys, pipes, lines without end.

#include <catch2/catch.hpp>

#include <algorithm>
#include <sstream>
#include <thread>

#include <sys/stat.h>

#include "trace_test_util.hpp"

using namespace kvtier;
using namespace kvtier::test;

namespace {

const std::string azure_header = "TIMESTAMP,ContextTokens,GeneratedTokens\n";

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A small agentic document: one request of 128 tokens in 64-token blocks.
std::string agentic_doc(const std::string& request_extra = "", const std::string& top_extra = "") {
  return R"({"block_size": 64, )" + top_extra + R"("requests": [{"t": 0.5, "type": "n", )" +
         request_extra + R"("in": 128, "out": 4, "hash_ids": [7, 8]}]})";
}

}  // namespace

TEST_CASE("azure: rows centuries apart are refused, not overflowed", "[trace][azure][hostile]") {
  // Nanoseconds since 1970 overflow 64 bits before 1677 and after 2262: reading these two rows
  // once aborted in the merger (a later row came out earlier).
  temp_trace far(azure_header + "1700-01-01 00:00:00,10,5\n2200-01-01 00:00:00,10,5\n", ".csv");
  trace_error e = read_error(far.path(), trace_format::azure);
  CHECK(e.line() == 3);
  CHECK(e.field() == "TIMESTAMP");
  CHECK(std::string(e.what()).find("292 years") != std::string::npos);
}

TEST_CASE("azure: any date from 0001 to 9999 is read relative to the first row",
          "[trace][azure][hostile]") {
  temp_trace early(azure_header + "0001-01-01 00:00:00,10,5\n0001-01-02 00:00:00.5,10,5\n",
                   ".csv");
  auto a = read_all(early.path(), trace_format::azure);
  REQUIRE(a.size() == 2);
  CHECK(a[0].arrival_ns == 0);
  CHECK(a[1].arrival_ns == 86'400'500'000'000);
  temp_trace late(azure_header + "9999-12-31 23:59:58.9999999,10,5\n9999-12-31 23:59:59,10,5\n",
                  ".csv");
  auto b = read_all(late.path(), trace_format::azure);
  REQUIRE(b.size() == 2);
  CHECK(b[0].arrival_ns == 0);
  CHECK(b[1].arrival_ns == 100);
  // The widest span that fits: 1900 to 2190 (290 years).
  temp_trace wide(azure_header + "1900-01-01 00:00:00,10,5\n2190-01-01 00:00:00,10,5\n", ".csv");
  auto c = read_all(wide.path(), trace_format::azure);
  REQUIRE(c.size() == 2);
  CHECK(c[1].arrival_ns == int64_t{105921} * 86400 * 1'000'000'000);
}

TEST_CASE("agentic: a UTF-8 byte order mark is read as the other readers read it",
          "[trace][agentic][hostile]") {
  temp_trace bom("\xEF\xBB\xBF" + agentic_doc(), ".json");
  CHECK(detect_format(bom.path()) == trace_format::agentic);
  auto all = read_all(bom.path(), trace_format::agentic);
  REQUIRE(all.size() == 1);
  CHECK(all[0].input_tokens == 128);
  CHECK(all[0].ids.size() == 2);
}

TEST_CASE("agentic and native: a key given twice is refused", "[trace][agentic][native][hostile]") {
  temp_trace request(agentic_doc(R"("in": 64, )"), ".json");
  trace_error a = read_error(request.path(), trace_format::agentic);
  CHECK(a.field() == "requests[0].in");
  CHECK(std::string(a.what()).find("appears twice") != std::string::npos);
  temp_trace top(agentic_doc("", R"("block_size": 16, )"), ".json");
  trace_error b = read_error(top.path(), trace_format::agentic);
  CHECK(b.field() == "block_size");
  temp_trace native(R"({"kvtier_trace": 1, "block_size": 16, "block_size": 64})"
                    "\n" R"({"arrival_s": 0, "input_length": 64, "output_length": 1})" "\n");
  trace_error c = read_error(native.path(), trace_format::native);
  CHECK(c.line() == 1);
  CHECK(c.field() == "block_size");
}

TEST_CASE("detect: a FIFO is detected from the stream its reader then reads",
          "[trace][detect][hostile]") {
  // Detection once opened the file, read its start and closed it; the reader opened it again and
  // got what was left (a pipe) or waited for a second writer forever (a FIFO).
  std::string content = "\xEF\xBB\xBF" + slurp(data_file("mooncake_head.jsonl"));
  size_t lines = static_cast<size_t>(std::count(content.begin(), content.end(), '\n'));
  std::string fifo = (std::filesystem::temp_directory_path() /
                      ("kvtier_fifo_" + std::to_string(::getpid()))).string();
  std::filesystem::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::thread writer([&] { std::ofstream(fifo, std::ios::binary) << content; });
  auto all = read_all(fifo, trace_format::detect);
  writer.join();
  std::filesystem::remove(fifo);
  auto expected = read_all(data_file("mooncake_head.jsonl"), trace_format::mooncake);
  REQUIRE(all.size() == lines);
  REQUIRE(expected.size() == lines);
  for (size_t i = 0; i < lines; ++i) {
    CHECK(all[i].arrival_ns == expected[i].arrival_ns);
    CHECK(all[i].input_tokens == expected[i].input_tokens);
    CHECK(all[i].ids == expected[i].ids);
  }
}

TEST_CASE("detect: a pretty-printed agentic document is read once, for detection and reading",
          "[trace][detect][agentic][hostile]") {
  std::string doc = "{\n  \"block_size\": 64,\n  \"requests\": [\n    {\"t\": 0, \"type\": \"n\", "
                    "\"in\": 128, \"out\": 4, \"hash_ids\": [7, 8]}\n  ]\n}\n";
  temp_trace pretty(doc, ".json");
  auto all = read_all(pretty.path(), trace_format::detect);
  REQUIRE(all.size() == 1);
  CHECK(all[0].ids.size() == 2);
}

TEST_CASE("readers: a line longer than max_line_bytes is refused before it is buffered whole",
          "[trace][hostile]") {
  std::string line(5000, ' ');
  temp_trace long_line(R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1]})"
                       "\n{" + line + "}\n");
  reader_options options;
  options.max_line_bytes = 4096;
  try {
    read_all(long_line.path(), trace_format::mooncake, options);
    FAIL("a 5002-byte line passed a 4096-byte limit");
  } catch (const trace_error& e) {
    CHECK(e.line() == 2);
    CHECK(std::string(e.what()).find("trace.max_line_bytes") != std::string::npos);
  }
  // Under the limit (the default), the line is read and found malformed instead.
  trace_error e = read_error(long_line.path(), trace_format::mooncake);
  CHECK(std::string(e.what()).find("trace.max_line_bytes") == std::string::npos);
}

TEST_CASE("agentic: a document larger than max_document_bytes is refused",
          "[trace][agentic][hostile]") {
  temp_trace doc(agentic_doc() + std::string(3000, ' '), ".json");
  reader_options options;
  options.max_document_bytes = 2048;
  try {
    read_all(doc.path(), trace_format::agentic, options);
    FAIL("a 3100-byte document passed a 2048-byte limit");
  } catch (const trace_error& e) {
    CHECK(std::string(e.what()).find("trace.max_document_bytes") != std::string::npos);
  }
  CHECK(read_all(doc.path(), trace_format::agentic).size() == 1);
}
