#include "sim/sweep/folder_lock.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "runtime/config/options.hpp"

namespace kvtier {

folder_lock::folder_lock(const std::string& path, const std::string& what) {
  // Close-on-exec: a worker this process starts must not keep the lock after it is gone.
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw config_error("cannot open " + path + ": " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK)
      throw config_error(what + " is in use by another kvtier process (" + path
                         + " is locked); wait for it to finish or stop it first");
    throw config_error("cannot lock " + path + ": " + std::strerror(err));
  }
}

folder_lock::~folder_lock() {
  if (fd_ >= 0)
    ::close(fd_);  // closing drops the lock
}

}  // namespace kvtier
