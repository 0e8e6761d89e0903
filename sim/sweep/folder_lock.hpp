#pragma once

// Locks that keep two runs from working one sweep at once (docs/sweep.md, "Locks"): the runner
// (local or Slurm), --plan and --collect hold DIR/.lock, and a worker holds its cell's
// DIR/cells/ID/.lock while it runs it. Both are flock(2) locks: the kernel drops them when the
// holder dies, so a crash never leaves a folder locked.

#include <string>

namespace kvtier {

class folder_lock {
 public:
  /// Takes the lock on `path` (created if missing) without waiting; throws config_error naming
  /// `what` when another process holds it.
  folder_lock(const std::string& path, const std::string& what);
  ~folder_lock();
  folder_lock(const folder_lock&) = delete;
  folder_lock& operator=(const folder_lock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace kvtier
