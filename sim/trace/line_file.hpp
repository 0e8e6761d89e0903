#pragma once

// A text file read in large chunks and handed out line by line, without loading it whole.
//
// Every line handed out is followed by at least `line_padding` readable bytes inside the buffer,
// so that simdjson can parse it in place, without a copy.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

namespace kvtier {

/// Readable bytes after every line; at least simdjson's SIMDJSON_PADDING (checked where
/// simdjson is included).
constexpr size_t line_padding = 64;

/// Opens `path` for reading; throws trace_error (line 0) saying why it cannot.
std::FILE* open_trace_file(const std::string& path);

class line_file {
 public:
  /// Throws trace_error (line 0) when the file cannot be opened. A line longer than
  /// `max_line_bytes` is an error (trace_error naming its line) before it is buffered whole.
  explicit line_file(const std::string& path, uint64_t max_line_bytes = uint64_t{16} << 20);
  ~line_file();
  line_file(const line_file&) = delete;
  line_file& operator=(const line_file&) = delete;

  /// The next line without its end of line ("\n" or "\r\n"; a UTF-8 byte order mark before the
  /// first line is dropped too), or false at the end of the file. The view stays valid until the
  /// next call.
  bool next(std::string_view& line);
  /// Keeps every byte read from now on in the buffer, so that rewind() can hand the same lines
  /// out again: format detection reads the first lines of the one stream the reader then reads,
  /// which is what lets a pipe or a FIFO be detected.
  void hold() { hold_ = true; }
  /// Every byte read so far, from the start of the file (only while holding); followed by
  /// line_padding readable bytes.
  std::string_view held() const;
  /// Back to the first line (only after hold(), before anything was dropped); stops holding.
  void rewind();
  /// Lines longer than `max` are an error from now on; `limit` names the setting in the error.
  void set_max_line_bytes(uint64_t max, std::string limit) {
    max_line_bytes_ = max;
    limit_name_ = std::move(limit);
  }
  uint64_t max_line_bytes() const { return max_line_bytes_; }
  /// Everything not handed out yet, to the end of the file, without a UTF-8 byte order mark at
  /// the start of the file; throws trace_error when that is more than `max_bytes` bytes.
  std::string rest(uint64_t max_bytes);
  const std::string& path() const { return path_; }

  /// 1-based number of the line last handed out.
  uint64_t line_number() const { return line_number_; }
  /// Bytes up to the end of the line last handed out.
  uint64_t bytes_read() const { return consumed_; }
  uint64_t bytes_total() const { return total_; }

 private:
  bool fill();
  [[noreturn]] void too_long() const;

  std::string path_;
  uint64_t max_line_bytes_;
  std::string limit_name_ = "trace.max_line_bytes";
  std::FILE* file_;
  std::unique_ptr<char[]> buf_;
  size_t capacity_;     // usable bytes of buf_; line_padding more are allocated
  size_t begin_ = 0;    // first byte not yet handed out
  size_t end_ = 0;      // one past the last byte read
  bool eof_ = false;
  bool hold_ = false;
  uint64_t line_number_ = 0;
  uint64_t consumed_ = 0;
  uint64_t total_ = 0;
};

/// True for a line of spaces and tabs only.
bool is_blank(std::string_view line);

}  // namespace kvtier
