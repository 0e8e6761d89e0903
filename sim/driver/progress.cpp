#include "sim/driver/progress.hpp"

#include <cstdio>

#include <unistd.h>

namespace kvtier {

progress_bar::progress_bar(std::string label, uint64_t total, bool enabled)
  : label_(std::move(label)),
    total_(total),
    active_(enabled && ::isatty(STDERR_FILENO) == 1),
    start_(std::chrono::steady_clock::now()),
    last_(start_) {
  // nop
}

progress_bar::~progress_bar() {
  finish();
}

void progress_bar::update(uint64_t done, uint64_t items) {
  if (!active_)
    return;
  auto now = std::chrono::steady_clock::now();
  if (now - last_ < std::chrono::milliseconds(100))
    return;
  last_ = now;
  constexpr int width = 30;
  double f = total_ > 0 ? static_cast<double>(done) / static_cast<double>(total_) : 0.0;
  if (f > 1.0)
    f = 1.0;
  int filled = static_cast<int>(f * width);
  std::string bar(static_cast<size_t>(filled), '#');
  bar.append(static_cast<size_t>(width - filled), '-');
  double secs = std::chrono::duration<double>(now - start_).count();
  std::fprintf(stderr, "\r%s [%s] %3.0f%%  %llu requests  %.1f s ", label_.c_str(), bar.c_str(),
               f * 100.0, static_cast<unsigned long long>(items), secs);
  std::fflush(stderr);
}

void progress_bar::finish() {
  if (!active_)
    return;
  std::fprintf(stderr, "\r\033[K");
  std::fflush(stderr);
  active_ = false;
}

}  // namespace kvtier
