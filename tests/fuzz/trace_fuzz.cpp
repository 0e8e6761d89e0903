// libFuzzer target for one trace reader (KVTIER_FUZZ_FORMAT: mooncake, azure, agentic, native,
// or detect: format detection, then the reader it picks). The input is a whole trace file. It is
// read to the end through the merger; a trace_error is the one accepted way to refuse it.
// Anything else (another exception, an assertion, a sanitizer report, a hang, memory out of
// proportion to the input) is a finding. Inputs of odd length are read skipping bad lines, the
// others strictly: one pass each keeps executions fast.

#include <cstdint>
#include <string>

#include "sim/trace/trace_reader.hpp"
#include "tests/fuzz/memory_file.hpp"

namespace {

using namespace kvtier;

trace_format format_of(const std::string& path) {
  std::string name = KVTIER_FUZZ_FORMAT;
  if (name == "detect")
    return detect_format(path);
  return *parse_trace_format(name);
}

// Reads the whole trace; returns the requests read. Throws trace_error as the readers do.
uint64_t read_all(const std::string& path, bool skip_bad_lines) {
  reader_options options;
  options.skip_bad_lines = skip_bad_lines;
  std::vector<std::unique_ptr<trace_source>> sources;
  sources.push_back(open_trace(path, format_of(path), 0, options));
  trace_merger merger(std::move(sources));
  trace_request r;
  uint64_t n = 0;
  int64_t last = INT64_MIN;
  while (merger.next(r)) {
    // What every reader promises (trace_reader.hpp): arrivals in order, lengths that agree.
    if (r.arrival_ns < last || r.line == 0 || r.think_ns < 0)
      __builtin_trap();
    last = r.arrival_ns;
    ++n;
  }
  return n;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static kvtier::fuzz::memory_file file;
  const std::string& path = file.hold(data, size);
  try {
    read_all(path, size % 2 == 1);
  } catch (const trace_error&) {
  }
  return 0;
}
