#pragma once

// Trace readers. Every format streams: a reader yields one request at a time (an agentic JSON
// file is one document and is read whole, which is still one conversation). Several files merge
// by arrival time; ties keep the order the files were given in, then file order.
//
// Formats (auto-detected from the file's first bytes unless --format names one):
//  mooncake  JSONL {"timestamp": ms, "input_length", "output_length", "hash_ids": [...]}, 512-token
//            blocks, len(hash_ids) == ceil(input_length / 512)
//  azure     CSV TIMESTAMP,ContextTokens,GeneratedTokens (no prefix information)
//  agentic   JSON {"block_size": 64, "requests": [...]} with sub-agents, `t` in seconds,
//            len(hash_ids) == floor(in / 64)
//  native    JSONL whose first line is {"kvtier_trace": 1, ...}; see docs/traces.md
//
// Bad input throws trace_error naming file, line and field, unless skip_bad_lines is set: then
// the line is skipped and counted.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/trace_request.hpp"

namespace kvtier {

enum class trace_format { detect, mooncake, azure, agentic, native };

const char* to_string(trace_format f);
std::optional<trace_format> parse_trace_format(const std::string& text);

class trace_error : public std::runtime_error {
 public:
  trace_error(std::string file, uint64_t line, std::string field, const std::string& what);
  const std::string& file() const { return file_; }
  uint64_t line() const { return line_; }
  const std::string& field() const { return field_; }
  /// What was wrong, without the location.
  const std::string& detail() const { return detail_; }

 private:
  std::string file_;
  uint64_t line_;
  std::string field_;
  std::string detail_;
};

struct reader_options {
  bool skip_bad_lines = false;
  /// With skip_bad_lines: called with the error of every skipped line (e.g. to warn about it).
  std::function<void(const trace_error&)> on_skip;
  /// A longer line is an error before it is buffered whole (trace.max_line_bytes).
  uint64_t max_line_bytes = uint64_t{16} << 20;
  /// A larger agentic document is an error before it is read whole (trace.max_document_bytes).
  uint64_t max_document_bytes = uint64_t{64} << 20;
};

/// One trace file, read in file order.
class trace_source {
 public:
  virtual ~trace_source() = default;
  /// Fills `out` with the next request (arrival non-decreasing) and returns true, or returns
  /// false at the end. Sets file, line, arrival, lengths, block identity and sessions; not seq.
  virtual bool next(trace_request& out) = 0;
  /// Lines skipped as bad so far (with skip_bad_lines).
  virtual uint64_t skipped() const = 0;
  virtual trace_format format() const = 0;
  /// Bytes read so far and in all (for progress).
  virtual uint64_t bytes_read() const = 0;
  virtual uint64_t bytes_total() const = 0;
};

/// Detects the format of `path` from its first bytes; throws trace_error when it cannot.
/// (open_trace() detects from the stream it then reads, so pipes and FIFOs are detected too.)
trace_format detect_format(const std::string& path, const reader_options& options = {});

/// Opens `path` as file number `file_index`. Ids are namespaced per file (derived from the index)
/// unless the file says otherwise (a native trace with "hash_scope": "global").
std::unique_ptr<trace_source> open_trace(const std::string& path, trace_format format,
                                         uint32_t file_index, const reader_options& options);

/// Merges several files by arrival; ties go to the lower file index. Assigns seq.
class trace_merger {
 public:
  explicit trace_merger(std::vector<std::unique_ptr<trace_source>> sources);
  bool next(trace_request& out);
  uint64_t skipped() const;
  uint64_t bytes_read() const;
  uint64_t bytes_total() const;
  const std::vector<std::unique_ptr<trace_source>>& sources() const { return sources_; }

 private:
  std::vector<std::unique_ptr<trace_source>> sources_;
  std::vector<trace_request> heads_;  // the next request of each source
  std::vector<uint32_t> heap_;         // sources that have a head, earliest head on top
  uint64_t next_seq_ = 0;
};

}  // namespace kvtier
