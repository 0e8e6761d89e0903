#pragma once

// kv_cache (kv_cache.hpp) over an engine's KV in POSIX shared memory: `kvtier serve --backend shm`,
// the CPU real mode (docs/protocol.md, "Real mode on the CPU"). The engine (a vLLM worker on the
// CPU, the tests) keeps its per-layer KV tensors in shared memory objects and names them with
// their strides; kvtier maps them and copies real bytes between them and its host tier with CPU
// threads, as the CUDA backend does with copy engines:
//
//   h2d   one thread: layer by layer, each layer completing (and signalling) on its own
//   d2h   another thread: all layers at once; first waits for the engine's forward fence
//
// Ops of one kind complete in submission order; the two kinds overlap. fill and poison
// (--verify) run on the d2h thread, ordered with the reads, as the CUDA backend orders them on
// its compute stream.
//
// IPC events become words of a signal segment the engine creates: signal_ipc_event(op, l, e)
// stores the record's number into word e once layer l of op is in place, and wakes its futex
// waiters (FUTEX_WAKE on the shared mapping). The engine waits for the word to reach the number
// a step reply named (wrap-around compare). The segment:
//
//   bytes [0, 64)      header, the engine's (kvtier reads nothing there)
//   bytes [64, 68)     forward: u32, the engine's: the step whose forward has written its KV
//   bytes [128, ...)   signal words: u32 each, word e = slot x layers + layer
//
// Saves read the engine's tensors only after the step that wrote them: fence_reads(step) makes
// every later D2H wait until the forward word has reached `step`.

#include <cstdint>
#include <memory>

#include "gpu/kv_cache.hpp"

namespace kvtier::gpu {

inline constexpr uint64_t shm_forward_offset = 64;
inline constexpr uint64_t shm_signals_offset = 128;

/// Bytes a signal segment of `words` signal words needs.
inline uint64_t shm_signal_bytes(uint64_t words) {
  return shm_signals_offset + 4 * words;
}

/// Maps the engine's segments (config.memory == attached_shm) and reserves the host tier; throws
/// gpu_error naming what does not fit (a missing segment, one too small for its layers, a host
/// tier larger than the host's memory).
std::unique_ptr<kv_cache> make_shm_kv_cache(const kv_cache_config& config);

/// Whether `a` has reached `b` on a wrapping u32 counter.
inline bool counter_reached(uint32_t a, uint32_t b) {
  return static_cast<int32_t>(a - b) >= 0;
}

}  // namespace kvtier::gpu
