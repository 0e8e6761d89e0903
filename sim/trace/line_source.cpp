#include "sim/trace/line_source.hpp"

#include "sim/trace/reader_support.hpp"

namespace kvtier {

line_source::line_source(std::unique_ptr<line_file> lines, uint32_t file_index,
                         const reader_options& options)
    : path_(lines->path()),
      file_index_(file_index),
      options_(options),
      lines_(std::move(lines)) {
  // nop
}

bool line_source::next_line(std::string_view& line) {
  while (lines_->next(line))
    if (!is_blank(line))
      return true;
  return false;
}

bool line_source::next(trace_request& out) {
  std::string_view line;
  while (next_line(line)) {
    reset_request(out);
    out.file = file_index_;
    out.line = lines_->line_number();
    try {
      parse(line, out);
      return true;
    } catch (const trace_error& error) {
      skip_or_throw(options_, error, skipped_);
    }
  }
  return false;
}

}  // namespace kvtier
