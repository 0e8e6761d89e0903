#pragma once

// A one-line progress bar on stderr for long runs; silent unless stderr is a terminal, so logs
// and pipes stay clean. Redraws at most ten times a second.

#include <chrono>
#include <cstdint>
#include <string>

namespace kvtier {

class progress_bar {
 public:
  /// `label` prefixes the line; `total` is the amount that means done (bytes, seconds, ...).
  progress_bar(std::string label, uint64_t total, bool enabled = true);
  ~progress_bar();

  /// Reports `done` of the total and a count of finished items.
  void update(uint64_t done, uint64_t items);
  /// Clears the line.
  void finish();

 private:
  std::string label_;
  uint64_t total_;
  bool active_;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace kvtier
