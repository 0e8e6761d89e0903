// The published traces under ../shared/traces, read in full. They must be there (CI has them):
// a missing file fails these tests rather than skipping them.

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>

#include "trace_test_util.hpp"

using namespace kvtier;
using namespace kvtier::test;

namespace {

std::string shared_trace(const std::string& name) {
  return std::string(KVTIER_SHARED_DIR) + "/traces/" + name;
}

struct totals {
  uint64_t requests = 0;
  uint64_t ids = 0;
  int64_t last_arrival_ns = 0;
};

totals read_through(const std::string& path, trace_format expected_format) {
  auto source = open_trace(path, trace_format::detect, 0, {});
  CHECK(source->format() == expected_format);
  totals t;
  trace_request r;
  while (source->next(r)) {
    ++t.requests;
    t.ids += r.ids.size();
    t.last_arrival_ns = r.arrival_ns;
  }
  CHECK(source->bytes_read() == source->bytes_total());
  return t;
}

}  // namespace

TEST_CASE("real traces: Mooncake conversation and synthetic", "[trace][real]") {
  totals conversation = read_through(shared_trace("mooncake/conversation_trace.jsonl"),
                                     trace_format::mooncake);
  CHECK(conversation.requests == 12'031);
  CHECK(conversation.ids == 288'500);
  CHECK(conversation.last_arrival_ns == 3'536'999'000'000);
  totals synthetic =
      read_through(shared_trace("mooncake/synthetic_trace.jsonl"), trace_format::mooncake);
  CHECK(synthetic.requests == 3'993);
  CHECK(synthetic.ids == 121'877);
  CHECK(synthetic.last_arrival_ns == 1'022'025'000'000);
}

TEST_CASE("real traces: Azure 2023 code and conversation", "[trace][real]") {
  totals code =
      read_through(shared_trace("azure2023/AzureLLMInferenceTrace_code.csv"), trace_format::azure);
  CHECK(code.requests == 8'819);
  CHECK(code.last_arrival_ns == 3'435'948'056'000);  // 19:14:19.9280160 - 18:17:03.9799600
  totals conv =
      read_through(shared_trace("azure2023/AzureLLMInferenceTrace_conv.csv"), trace_format::azure);
  CHECK(conv.requests == 19'366);
  CHECK(conv.last_arrival_ns == 3'501'721'937'000);  // 19:14:08.4025270 - 18:15:46.6805900
}

TEST_CASE("real traces: all agentic files, merged", "[trace][real]") {
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(shared_trace("agentic")))
    if (entry.path().extension() == ".json")
      paths.push_back(entry.path().string());
  std::sort(paths.begin(), paths.end());
  REQUIRE(paths.size() == 83);

  std::vector<std::unique_ptr<trace_source>> sources;
  for (uint32_t i = 0; i < paths.size(); ++i) {
    INFO(paths[i]);
    sources.push_back(open_trace(paths[i], trace_format::detect, i, {}));
    CHECK(sources.back()->format() == trace_format::agentic);
  }
  trace_merger merger(std::move(sources));
  uint64_t requests = 0, ids = 0, subagent_starts = 0, bad_lengths = 0;
  int64_t last_arrival_ns = 0;
  bool ordered = true;
  trace_request r;
  while (merger.next(r)) {
    ordered = ordered && r.seq == requests && r.arrival_ns >= last_arrival_ns;
    last_arrival_ns = r.arrival_ns;
    ++requests;
    ids += r.ids.size();
    subagent_starts += r.parent_session != 0;
    bad_lengths += r.ids.size() != r.input_tokens / 64;
  }
  CHECK(ordered);
  CHECK(requests == 4'821);  // 4,700 main requests and 121 in 11 sub-agents
  CHECK(ids == 9'568'213);
  CHECK(subagent_starts == 11);  // every sub-agent follows a main request
  CHECK(bad_lengths == 0);
  CHECK(merger.skipped() == 0);
}
