#include "sim/full/preloaded_trace.hpp"

#include <chrono>
#include <memory>

#include "core/check.hpp"
#include "sim/request_blocks.hpp"
#include "sim/trace/trace_reader.hpp"

namespace kvtier {

namespace {

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

void map_all(preloaded_trace& t, request_blocks& mapper) {
  auto start = std::chrono::steady_clock::now();
  t.blocks.resize(t.requests.size());
  for (size_t i = 0; i < t.requests.size(); ++i) {
    KVTIER_ASSERT(t.requests[i].seq == i);
    mapper.map(t.requests[i], t.blocks[i]);
    t.block_count += t.blocks[i].size();
  }
  t.map_s = since(start);
}

}  // namespace

preloaded_trace preload(const std::vector<std::string>& traces, uint32_t block_size) {
  preloaded_trace t;
  auto start = std::chrono::steady_clock::now();
  std::vector<std::unique_ptr<trace_source>> sources;
  for (size_t i = 0; i < traces.size(); ++i)
    sources.push_back(open_trace(traces[i], trace_format::detect, static_cast<uint32_t>(i), {}));
  trace_merger merger(std::move(sources));
  trace_request r;
  while (merger.next(r))
    t.requests.push_back(r);
  t.parse_s = since(start);
  request_blocks mapper(block_size, traces);
  map_all(t, mapper);
  return t;
}

preloaded_trace preload(std::vector<trace_request> requests, uint32_t block_size) {
  preloaded_trace t;
  t.requests = std::move(requests);
  request_blocks mapper(block_size, {"requests"});
  map_all(t, mapper);
  return t;
}

namespace {

class preloaded_feed : public request_feed {
 public:
  explicit preloaded_feed(const preloaded_trace& t) : trace_(t) {}

  bool next(trace_request& out) override {
    if (next_ >= trace_.requests.size())
      return false;
    out = trace_.requests[next_++];
    return true;
  }
  bool blocks_of(const trace_request& r, std::vector<cache_block>& out) override {
    out = trace_.blocks[r.seq];
    return true;
  }
  std::optional<input_problem> problem() const override { return std::nullopt; }

 private:
  const preloaded_trace& trace_;
  size_t next_ = 0;
};

}  // namespace

std::shared_ptr<request_feed> feed_of(const preloaded_trace& t) {
  return std::make_shared<preloaded_feed>(t);
}

}  // namespace kvtier
