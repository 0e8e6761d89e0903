#pragma once

// The shared-memory primitives of the CPU real mode (docs/vllm.md, "The data path"): an engine's
// POSIX shared memory object mapped into kvtier, and the 32-bit words both processes wait on
// (futexes on a shared mapping: no private flag).

#include <cstdint>
#include <string>

namespace kvtier::gpu {

/// One POSIX shared memory object of the engine's, mapped read-write; throws gpu_error naming
/// the object when it cannot be opened, read or mapped.
class mapped_segment {
 public:
  explicit mapped_segment(const std::string& name);
  ~mapped_segment();
  mapped_segment(const mapped_segment&) = delete;
  mapped_segment& operator=(const mapped_segment&) = delete;

  uint8_t* base() const { return static_cast<uint8_t*>(base_); }
  uint64_t bytes() const { return bytes_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  void* base_ = nullptr;
  uint64_t bytes_ = 0;
};

uint32_t load_word(const uint32_t* w);
/// Stores `v` and wakes every process waiting on the word.
void store_and_wake(uint32_t* w, uint32_t v);
/// Waits (at most `ns`) while the word still holds `seen`.
void wait_word(uint32_t* w, uint32_t seen, long ns);

}  // namespace kvtier::gpu
