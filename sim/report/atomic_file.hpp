#pragma once

// Output files appear whole or not at all: the content goes to a temporary file beside the
// target (`NAME.tmp.PID`), which is renamed over the target only on commit. A run that fails
// midway leaves the previous outputs untouched; one stopped by SIGINT or SIGTERM removes its
// temporaries on the way out, and one killed outright leaves them for the next run into the same
// folder to remove (output_folder).

#include <fstream>
#include <string>
#include <vector>

namespace kvtier {

class atomic_file {
 public:
  /// Opens a temporary file beside `path`; throws std::runtime_error if it cannot.
  explicit atomic_file(std::string path);
  ~atomic_file();
  atomic_file(const atomic_file&) = delete;
  atomic_file& operator=(const atomic_file&) = delete;

  std::ostream& out() { return out_; }
  /// Flushes and closes the temporary file; throws std::runtime_error if any write failed (a
  /// full disk). The target is not touched.
  void finish();
  /// finish(), then renames onto the target; throws std::runtime_error on failure.
  void commit();
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return temp_; }

 private:
  friend void commit_together(const std::vector<atomic_file*>& files);

  std::string path_;
  std::string temp_;
  std::ofstream out_;
  int slot_ = -1;  // in the table of temporaries that a signal removes
  bool finished_ = false;
  bool committed_ = false;
};

/// Renames every file onto its target, or none of them: each is finished first (a write error
/// changes nothing), and when a rename fails, the targets renamed before it get their previous
/// content back (or are removed, where there was none). Throws std::runtime_error on failure.
/// Only a crash between two renames (microseconds) can leave some files new and others old.
void commit_together(const std::vector<atomic_file*>& files);

/// The folder of a run's outputs. Creates it (and its parents) if needed, removes the
/// temporaries of `names` that earlier runs left behind (those whose process is gone), and
/// checks that a file can be created in it, all before the run starts. Unless keep() is called,
/// the folders it created are removed again when it goes (if still empty), so a run refused for
/// bad input leaves no new empty folder. Throws std::runtime_error if the folder cannot be made
/// or written.
class output_folder {
 public:
  output_folder(std::string dir, const std::vector<std::string>& names);
  ~output_folder();
  output_folder(const output_folder&) = delete;
  output_folder& operator=(const output_folder&) = delete;

  const std::string& dir() const { return dir_; }
  /// The path of `name` inside the folder.
  std::string file(const std::string& name) const { return dir_ + "/" + name; }
  void keep() { kept_ = true; }

 private:
  std::string dir_;
  std::vector<std::string> created_;  // folders this made, outermost first
  std::vector<int> slots_;
  bool kept_ = false;
};

/// Creates `dir` and its parents if needed; throws std::runtime_error if it cannot.
void make_directories(const std::string& dir);

/// Seconds with microsecond precision from integer nanoseconds, without floating-point rounding
/// (so text outputs are byte-identical across runs and machines): 1500000 -> "0.001500".
std::string seconds_text(int64_t ns);

}  // namespace kvtier
