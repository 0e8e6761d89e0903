#include "gpu/shm/shm_segment.hpp"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <ctime>

#include "gpu/gpu_error.hpp"

namespace kvtier::gpu {

mapped_segment::mapped_segment(const std::string& name) : name_(name) {
  if (name.size() < 2 || name[0] != '/' || name.find('/', 1) != std::string::npos)
    throw gpu_error("shared memory object '" + name + "': a name is '/' and then no other '/' "
                    "(shm_open(3)), as in /dev/shm/<name>");
  int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0)
    throw gpu_error("cannot open shared memory object '" + name + "': " + std::strerror(errno)
                    + "; the engine must run on this machine, as a user that may share it");
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    throw gpu_error("cannot stat shared memory object '" + name + "': " + std::strerror(err));
  }
  bytes_ = static_cast<uint64_t>(st.st_size);
  if (bytes_ > 0)
    base_ = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd);
  if (base_ == MAP_FAILED)
    throw gpu_error("cannot map shared memory object '" + name + "' (" + std::to_string(bytes_)
                    + " bytes): " + std::strerror(err));
}

mapped_segment::~mapped_segment() {
  if (base_ != MAP_FAILED && base_ != nullptr)
    munmap(base_, bytes_);
}

uint32_t load_word(const uint32_t* w) {
  return __atomic_load_n(w, __ATOMIC_ACQUIRE);
}

void store_and_wake(uint32_t* w, uint32_t v) {
  __atomic_store_n(w, v, __ATOMIC_RELEASE);
  syscall(SYS_futex, w, FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void wait_word(uint32_t* w, uint32_t seen, long ns) {
  timespec t{ns / 1000000000L, ns % 1000000000L};
  syscall(SYS_futex, w, FUTEX_WAIT, seen, &t, nullptr, 0);
}

}  // namespace kvtier::gpu
