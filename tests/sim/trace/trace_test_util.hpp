#pragma once

// Helpers for the trace reader tests: fixture paths, throwaway trace files, reading a source out.

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

#include "sim/trace/trace_reader.hpp"

namespace kvtier::test {

/// A fixture under tests/sim/trace/data.
inline std::string data_file(const std::string& name) {
  return std::string(KVTIER_TRACE_DATA) + "/" + name;
}

/// A file with the given content in the temp folder, removed at scope exit. The name is unique
/// per process and call, since ctest runs test cases as parallel processes.
class temp_trace {
 public:
  temp_trace(const std::string& content, const std::string& suffix = ".jsonl") {
    static std::atomic<int> counter{0};
    path_ = (std::filesystem::temp_directory_path() /
             ("kvtier_trace_test_" + std::to_string(::getpid()) + "_" +
              std::to_string(counter++) + suffix))
                .string();
    std::ofstream(path_, std::ios::binary) << content;
  }
  ~temp_trace() { std::filesystem::remove(path_); }
  temp_trace(const temp_trace&) = delete;
  temp_trace& operator=(const temp_trace&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// Every request `source` yields, in order.
inline std::vector<trace_request> read_all(trace_source& source) {
  std::vector<trace_request> all;
  trace_request r;
  while (source.next(r))
    all.push_back(r);
  return all;
}

/// Every request of `path` read as `format` (file index 0).
inline std::vector<trace_request> read_all(const std::string& path, trace_format format,
                                           const reader_options& options = {}) {
  auto source = open_trace(path, format, 0, options);
  return read_all(*source);
}

/// The error that reading `path` as `format` throws (fails the test if none is thrown).
inline trace_error read_error(const std::string& path, trace_format format) {
  try {
    read_all(path, format);
  } catch (const trace_error& e) {
    return e;
  }
  throw std::logic_error("expected a trace_error reading " + path);
}

}  // namespace kvtier::test
