#include "sim/trace/line_file.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <filesystem>

#include <sys/resource.h>
#include <unistd.h>

#include "core/check.hpp"
#include "sim/trace/trace_reader.hpp"

namespace kvtier {

namespace {

// Large enough that a trace costs a handful of reads, small enough to stream any size.
constexpr size_t chunk_bytes = size_t{1} << 20;

// A small file gets a buffer of its size (the buffer still grows for a line that outgrows it):
// opening many small traces (tests, fuzzing) then costs no megabyte each.
size_t buffer_for(uint64_t file_bytes) {
  constexpr size_t smallest = 4096;
  return file_bytes == 0 || file_bytes >= chunk_bytes
           ? chunk_bytes
           : std::max(smallest, static_cast<size_t>(file_bytes) + 1);
}

// Not zero-filled: every byte handed out is read from the file first, and only the padding past
// the last usable byte (which a SIMD parser may read but never uses) is cleared. Zero-filling the
// whole buffer cost a page fault per 4 KiB on every open, most of a small trace's read time.
std::unique_ptr<char[]> padded_buffer(size_t usable_bytes) {
  std::unique_ptr<char[]> buf(new char[usable_bytes + line_padding]);
  std::memset(buf.get() + usable_bytes, 0, line_padding);
  return buf;
}

// A field of /proc/self/status in bytes ("VmSize:  1234 kB"); 0 if it cannot be read.
uint64_t own_status_bytes(const char* field) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f)
    return 0;
  char line[256];
  uint64_t kib = 0;
  size_t len = std::strlen(field);
  while (std::fgets(line, sizeof(line), f))
    if (std::strncmp(line, field, len) == 0 && line[len] == ':') {
      kib = std::strtoull(line + len + 1, nullptr, 10);
      break;
    }
  std::fclose(f);
  return kib * 1024;
}

// What this process may still take: the machine's available memory, or less where a limit on the
// process (ulimit -v: RLIMIT_AS over what it has mapped; ulimit -d: RLIMIT_DATA over its data
// segment) leaves less. `limited_by` names the limit that decided, or "" for the machine.
uint64_t memory_left(std::string& limited_by) {
  uint64_t left = static_cast<uint64_t>(::sysconf(_SC_AVPHYS_PAGES)) *
                  static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  limited_by.clear();
  struct limit {
    int resource;
    const char* status_field;
    const char* name;
  };
  for (const limit& l : {limit{RLIMIT_AS, "VmSize", "ulimit -v (RLIMIT_AS)"},
                         limit{RLIMIT_DATA, "VmData", "ulimit -d (RLIMIT_DATA)"}}) {
    rlimit r{};
    if (::getrlimit(l.resource, &r) != 0 || r.rlim_cur == RLIM_INFINITY)
      continue;
    uint64_t used = own_status_bytes(l.status_field);
    uint64_t room = r.rlim_cur > used ? r.rlim_cur - used : 0;
    if (room < left) {
      left = room;
      limited_by = l.name;
    }
  }
  return left;
}

}  // namespace

std::FILE* open_trace_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw trace_error(path, 0, "", "is a directory: name its trace files (for example dir/*.json)");
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr)
    throw trace_error(path, 0, "", std::string("cannot open: ") + std::strerror(errno));
  return file;
}

line_file::line_file(const std::string& path, uint64_t max_line_bytes)
    : path_(path),
      max_line_bytes_(max_line_bytes),
      file_(open_trace_file(path)),
      capacity_(chunk_bytes) {
  std::error_code ec;
  auto size = std::filesystem::file_size(path, ec);
  total_ = ec ? 0 : size;  // unknown for pipes and the like: progress just says so
  capacity_ = buffer_for(total_);
  buf_ = padded_buffer(capacity_);
}

line_file::~line_file() {
  std::fclose(file_);
}

bool line_file::fill() {
  if (eof_)
    return false;
  if (begin_ > 0 && !hold_) {
    std::memmove(buf_.get(), buf_.get() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  if (end_ == capacity_) {  // one line fills the buffer: make room for the rest of it
    // trace.max_line_bytes may allow more than this process may hold (its top is 4 GiB): the
    // line is refused, naming both, before the buffer takes the memory the run needs.
    std::string limited_by;
    uint64_t available = memory_left(limited_by);
    auto refuse = [&] {
      return trace_error(path_, line_number_ + 1, "",
                         "the line is longer than " + std::to_string(capacity_) +
                           " bytes, and buffering more would take over half of the " +
                           std::to_string(available) + " bytes " +
                           (limited_by.empty() ? std::string("of this machine's available memory")
                                               : "this process may still take under its " +
                                                   limited_by) +
                           " (" + limit_name_ + " is " + std::to_string(max_line_bytes_) +
                           "; lower it, or split the line)");
    };
    if (2 * capacity_ > available / 2)
      throw refuse();
    std::unique_ptr<char[]> bigger;
    try {
      bigger = padded_buffer(2 * capacity_);
    } catch (const std::bad_alloc&) {
      throw refuse();  // the allocator had less than the limits said (fragmented, overcommit)
    }
    std::memcpy(bigger.get(), buf_.get(), end_);
    buf_ = std::move(bigger);
    capacity_ *= 2;
  }
  size_t want = capacity_ - end_;
  size_t got = std::fread(buf_.get() + end_, 1, want, file_);
  if (got < want) {
    if (std::ferror(file_))
      throw trace_error(path_, line_number_ + 1, "",
                        std::string("cannot read: ") + std::strerror(errno));
    eof_ = true;
  }
  end_ += got;
  return got > 0;
}

std::string_view line_file::held() const {
  KVTIER_ASSERT(hold_);
  return std::string_view(buf_.get(), end_);
}

void line_file::rewind() {
  KVTIER_ASSERT(hold_);
  hold_ = false;
  begin_ = 0;
  consumed_ = 0;
  line_number_ = 0;
}

std::string line_file::rest(uint64_t max_bytes) {
  auto too_large = [&] {
    return trace_error(path_, 0, "",
                       "the document is larger than " + std::to_string(max_bytes) +
                         " bytes (trace.max_document_bytes; --set trace.max_document_bytes=N "
                         "reads larger ones)");
  };
  bool at_start = consumed_ == 0;
  if (end_ - begin_ > max_bytes)
    throw too_large();
  std::string text(buf_.get() + begin_, end_ - begin_);
  consumed_ += end_ - begin_;
  begin_ = end_;
  char chunk[1 << 16];
  size_t got;
  while (!eof_ && (got = std::fread(chunk, 1, sizeof chunk, file_)) > 0) {
    if (text.size() + got > max_bytes)
      throw too_large();
    text.append(chunk, got);
    consumed_ += got;
  }
  if (std::ferror(file_))
    throw trace_error(path_, 0, "", std::string("cannot read: ") + std::strerror(errno));
  eof_ = true;
  if (at_start && text.compare(0, 3, "\xEF\xBB\xBF") == 0)
    text.erase(0, 3);
  return text;
}

void line_file::too_long() const {
  throw trace_error(path_, line_number_ + 1, "",
                    "the line is longer than " + std::to_string(max_line_bytes_) + " bytes (" +
                      limit_name_ + "; raise it with --set)");
}

bool line_file::next(std::string_view& line) {
  size_t scanned = 0;  // bytes after begin_ known to hold no newline
  size_t length;
  bool newline;
  for (;;) {
    const char* from = buf_.get() + begin_ + scanned;
    const void* found = std::memchr(from, '\n', end_ - begin_ - scanned);
    if (found != nullptr) {
      length = static_cast<const char*>(found) - (buf_.get() + begin_);
      newline = true;
      break;
    }
    scanned = end_ - begin_;
    if (scanned > max_line_bytes_)
      too_long();
    if (!fill()) {
      if (begin_ == end_)
        return false;
      length = end_ - begin_;  // the last line has no end of line
      newline = false;
      break;
    }
  }
  if (length > max_line_bytes_)
    too_long();
  line = std::string_view(buf_.get() + begin_, length);
  begin_ += length + (newline ? 1 : 0);
  consumed_ += length + (newline ? 1 : 0);
  ++line_number_;
  if (!line.empty() && line.back() == '\r')
    line.remove_suffix(1);
  if (line_number_ == 1 && line.substr(0, 3) == "\xEF\xBB\xBF")
    line.remove_prefix(3);
  return true;
}

bool is_blank(std::string_view line) {
  return line.find_first_not_of(" \t") == std::string_view::npos;
}

}  // namespace kvtier
