#pragma once

// Output files appear whole or not at all: the content goes to a temporary file beside the
// target, which is renamed over the target only on commit(). A run that fails midway leaves the
// previous outputs untouched.

#include <fstream>
#include <string>

namespace kvtier {

class atomic_file {
 public:
  /// Opens a temporary file beside `path`; throws std::runtime_error if it cannot.
  explicit atomic_file(std::string path);
  ~atomic_file();
  atomic_file(const atomic_file&) = delete;
  atomic_file& operator=(const atomic_file&) = delete;

  std::ostream& out() { return out_; }
  /// Flushes, closes and renames onto the target; throws std::runtime_error on failure.
  void commit();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string temp_;
  std::ofstream out_;
  bool committed_ = false;
};

/// Creates `dir` and its parents if needed; throws std::runtime_error if it cannot.
void make_directories(const std::string& dir);

/// Seconds with microsecond precision from integer nanoseconds, without floating-point rounding
/// (so text outputs are byte-identical across runs and machines): 1500000 -> "0.001500".
std::string seconds_text(int64_t ns);

}  // namespace kvtier
