#pragma once

// What the real backend's start-up spends its time on (docs/gpu.md "Start-up"): allocating the
// device tier, pinning the host tier, calibrating the compute emulation. Each phase is said on a
// progress sink as it starts and ends (kvtier prints them on stderr), and its time is kept for
// summary.json. The host tier is mapped and its pages first touched by several threads before
// one cudaHostRegister pins them: a single-threaded cudaHostAlloc zeroes every page on one core.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace kvtier::gpu {

enum class startup_phase { device_memory, host_pinning, compute_calibration };

/// Seconds per phase; total_s also counts what lies between them (streams, events, kernels).
struct startup_timing {
  double device_memory_s = 0;
  double host_pinning_s = 0;
  double compute_calibration_s = 0;
  double total_s = 0;
};

using progress_sink = std::function<void(const std::string& line)>;

class startup_progress {
 public:
  explicit startup_progress(progress_sink sink);
  /// `what` says what the phase does ("pinning 78.1 GiB of host KV blocks (16 threads)").
  void begin(startup_phase phase, const std::string& what);
  void end();
  /// Also a line of its own (a warning about the tiers' size).
  void say(const std::string& line) const;
  startup_timing finish();

 private:
  using clock = std::chrono::steady_clock;
  progress_sink sink_;
  clock::time_point created_, began_;
  startup_phase phase_ = startup_phase::device_memory;
  std::string what_;
  startup_timing timing_;
};

/// Anonymous memory of `bytes`, every page written once by `threads` threads in parallel (so the
/// kernel allocates and zeroes them on every core). Throws std::runtime_error when mapping fails.
std::byte* map_touched_pages(uint64_t bytes, unsigned threads);
void unmap_pages(std::byte* p, uint64_t bytes);
/// Threads for first touch: the host's cores, at most 16.
unsigned touch_threads();

}  // namespace kvtier::gpu
