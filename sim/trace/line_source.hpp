#pragma once

// The part every line-based reader (Mooncake, Azure, native) shares: blank lines are ignored,
// every other line goes to parse(), and a line that parse() rejects stops the read or, with
// skip_bad_lines, is skipped and counted.

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "sim/trace/line_file.hpp"
#include "sim/trace/trace_reader.hpp"

namespace kvtier {

class line_source : public trace_source {
 public:
  bool next(trace_request& out) final;
  uint64_t skipped() const final { return skipped_; }
  uint64_t bytes_read() const final { return lines_->bytes_read(); }
  uint64_t bytes_total() const final { return lines_->bytes_total(); }

 protected:
  /// Reads `lines` from where they stand (the start, or the start again after detection).
  line_source(std::unique_ptr<line_file> lines, uint32_t file_index,
              const reader_options& options);

  /// Fills `out` from `line` (file, line number and defaults are set already), or throws
  /// trace_error for a bad line. `line` is followed by line_padding readable bytes.
  virtual void parse(std::string_view line, trace_request& out) = 0;

  /// The next line that is not blank (for a header), or false at the end of the file.
  bool next_line(std::string_view& line);
  uint64_t line_number() const { return lines_->line_number(); }
  const std::string& path() const { return path_; }
  uint32_t file_index() const { return file_index_; }

 private:
  std::string path_;
  uint32_t file_index_;
  reader_options options_;
  std::unique_ptr<line_file> lines_;
  uint64_t skipped_ = 0;
};

}  // namespace kvtier
