#include "gpu/startup_progress.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace kvtier::gpu {

startup_progress::startup_progress(progress_sink sink)
    : sink_(std::move(sink)), created_(clock::now()) {}

void startup_progress::begin(startup_phase phase, const std::string& what) {
  phase_ = phase;
  what_ = what;
  began_ = clock::now();
  say(what_ + " ...");
}

void startup_progress::end() {
  double s = std::chrono::duration<double>(clock::now() - began_).count();
  switch (phase_) {
    case startup_phase::device_memory: timing_.device_memory_s += s; break;
    case startup_phase::host_pinning: timing_.host_pinning_s += s; break;
    case startup_phase::compute_calibration: timing_.compute_calibration_s += s; break;
  }
  char took[48];
  std::snprintf(took, sizeof took, ": done in %.2f s", s);
  say(what_ + took);
}

void startup_progress::say(const std::string& line) const {
  if (sink_)
    sink_(line);
}

startup_timing startup_progress::finish() {
  timing_.total_s = std::chrono::duration<double>(clock::now() - created_).count();
  return timing_;
}

unsigned touch_threads() {
  return std::clamp(std::thread::hardware_concurrency(), 1u, 16u);
}

std::byte* map_touched_pages(uint64_t bytes, unsigned threads) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    throw std::runtime_error(std::string("mmap of host memory failed: ") + std::strerror(errno));
  auto* base = static_cast<std::byte*>(p);
  constexpr uint64_t page = 4096;
  threads = std::max(threads, 1u);
  uint64_t per = (bytes / threads + page - 1) / page * page;
  std::vector<std::thread> workers;
  for (unsigned i = 0; i < threads; ++i) {
    uint64_t from = std::min(bytes, i * per), to = std::min(bytes, from + per);
    if (from < to)
      workers.emplace_back([=] { std::memset(base + from, 0, to - from); });
  }
  for (std::thread& w : workers)
    w.join();
  return base;
}

void unmap_pages(std::byte* p, uint64_t bytes) {
  if (p != nullptr)
    munmap(p, bytes);
}

}  // namespace kvtier::gpu
