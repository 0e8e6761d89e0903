#pragma once

// The fuzz input as a file: the readers and the config loader take paths, so each input is
// written to an anonymous in-memory file (memfd) and handed over as /proc/self/fd/N. Nothing
// touches the disk, and no two fuzzer processes share a name.

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace kvtier::fuzz {

class memory_file {
 public:
  memory_file() : fd_(::memfd_create("kvtier-fuzz", 0)) {
    if (fd_ < 0)
      std::abort();
  }
  ~memory_file() { ::close(fd_); }
  memory_file(const memory_file&) = delete;
  memory_file& operator=(const memory_file&) = delete;

  /// Replaces the file's contents with `size` bytes at `data`; returns its path.
  const std::string& hold(const uint8_t* data, size_t size) {
    if (::ftruncate(fd_, 0) != 0)
      std::abort();
    size_t done = 0;
    while (done < size) {
      ssize_t n = ::pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0)
        std::abort();
      done += static_cast<size_t>(n);
    }
    return path_;
  }

 private:
  int fd_;
  std::string path_ = "/proc/self/fd/" + std::to_string(fd_);
};

}  // namespace kvtier::fuzz
