#include <catch2/catch.hpp>

#include "sim/trace/trace_ids.hpp"
#include "trace_test_util.hpp"

using namespace kvtier;
using namespace kvtier::test;

namespace {

std::string mooncake_line(int timestamp_ms, int first_id) {
  return R"({"timestamp": )" + std::to_string(timestamp_ms) +
         R"(, "input_length": 512, "output_length": 1, "hash_ids": [)" +
         std::to_string(first_id) + "]}\n";
}

}  // namespace

TEST_CASE("merger: arrival order, ties to the lower file index, then file order",
          "[trace][merger]") {
  // Both files use id 0 for different blocks, as separate Mooncake files do.
  temp_trace a(mooncake_line(0, 0) + mooncake_line(0, 1) + mooncake_line(3000, 2));
  temp_trace b(mooncake_line(0, 0) + mooncake_line(1500, 1) + mooncake_line(3000, 2));
  std::vector<std::unique_ptr<trace_source>> sources;
  sources.push_back(open_trace(a.path(), trace_format::mooncake, 0, {}));
  sources.push_back(open_trace(b.path(), trace_format::mooncake, 1, {}));
  trace_merger merger(std::move(sources));
  std::vector<std::pair<uint32_t, uint64_t>> order;  // (file, line)
  std::vector<trace_request> all;
  trace_request r;
  while (merger.next(r)) {
    CHECK(r.seq == all.size());
    order.emplace_back(r.file, r.line);
    all.push_back(r);
  }
  CHECK(order == std::vector<std::pair<uint32_t, uint64_t>>{
                     {0, 1}, {0, 2}, {1, 1}, {1, 2}, {0, 3}, {1, 3}});
  // Equal ids in different files are told apart by their id spaces.
  CHECK(all[0].ids == all[2].ids);
  CHECK(all[0].id_space == file_id_space(0));
  CHECK(all[2].id_space == file_id_space(1));
  CHECK(all[0].id_space != all[2].id_space);
  CHECK(merger.bytes_read() == merger.bytes_total());
  CHECK(merger.skipped() == 0);
  CHECK_FALSE(merger.next(r));  // stays at the end
}

TEST_CASE("merger: mixes formats and sums skipped lines", "[trace][merger]") {
  // Azure arrivals count from its first row, agentic ones from the conversation start.
  temp_trace csv("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                 "2023-11-16 18:00:00.0,10,1\n"
                 "bad row\n"
                 "2023-11-16 18:00:11.0,10,1\n",
                 ".csv");
  reader_options options;
  options.skip_bad_lines = true;
  std::vector<std::unique_ptr<trace_source>> sources;
  sources.push_back(open_trace(data_file("agentic_subagent.json"), trace_format::detect, 0,
                               options));
  sources.push_back(open_trace(csv.path(), trace_format::detect, 1, options));
  sources.push_back(open_trace(data_file("mooncake_head.jsonl"), trace_format::detect, 2,
                               options));
  trace_merger merger(std::move(sources));
  std::vector<std::pair<uint32_t, int64_t>> order;  // (file, arrival in ms)
  trace_request r;
  while (merger.next(r))
    order.emplace_back(r.file, r.arrival_ns / 1'000'000);
  CHECK(order == std::vector<std::pair<uint32_t, int64_t>>{
                     {0, 0}, {1, 0}, {2, 0}, {2, 0}, {2, 0}, {2, 0}, {2, 3000}, {0, 10000},
                     {1, 11000}, {0, 12500}, {0, 15000}, {0, 16500}, {0, 16500}, {0, 20000}});
  CHECK(merger.skipped() == 1);
  CHECK(merger.sources().size() == 3);
}

TEST_CASE("merger: no sources, or only empty ones", "[trace][merger]") {
  trace_request r;
  trace_merger none({});
  CHECK_FALSE(none.next(r));
  temp_trace empty("");
  std::vector<std::unique_ptr<trace_source>> sources;
  sources.push_back(open_trace(empty.path(), trace_format::mooncake, 0, {}));
  trace_merger merger(std::move(sources));
  CHECK_FALSE(merger.next(r));
  CHECK(merger.bytes_total() == 0);
}
